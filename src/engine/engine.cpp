#include "engine/engine.h"

#include <algorithm>
#include <utility>

#include "kv/tiers/offload_planner.h"
#include "parallel/tensor_parallel.h"

namespace kvs {
namespace {

// Steps of at least this many tokens measure the prefill rate (fewer are decode steps, slower per token).
constexpr size_t kPrefillRateTokens = 32;

}  // namespace

Expected<std::unique_ptr<Engine>> Engine::create(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                                 const EngineConfig& config) {
  auto engine = create_local(model, tokenizer, pool, config);
  Communicator* comm = model.communicator();
  if (!comm) return engine;
  // Tensor parallelism: whatever happened here, the workers are waiting to hear it.
  Status mine = engine ? Status::ok() : engine.status();
  std::optional<TensorParallelSession> session;
  if (mine.is_ok()) {
    const KvTierStack* tiers = (*engine)->tiers_.get();
    session = TensorParallelSession{.groups = (*engine)->kv_groups_,
                                    .window = config.kv.window,
                                    .hybrid = config.kv.hybrid && config.kv.layout == KvLayout::kPaged,
                                    .mla_form = config.mla_form,
                                    .host_tier_bytes = tiers ? tiers->host().stats().capacity_bytes : 0};
  }
  auto driver = TensorParallelDriver::start(*comm, session ? &*session : nullptr, model.file_fingerprint(), mine);
  if (!driver) return driver.status();
  Engine& e = **engine;
  e.tp_ = std::move(driver).value();
  e.runner_ = std::make_unique<TensorParallelRunner>(std::move(e.runner_), *e.tp_);
  e.executor_ = std::make_unique<ReplicatedKvExecutor>(std::move(e.executor_), *e.tp_);
  return engine;
}

Expected<std::unique_ptr<Engine>> Engine::create_local(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                                       const EngineConfig& config) {
  auto layout = engine_kv_layout(model, config);
  if (!layout) return layout.status();
  const bool evicts = config.kv.policy.resolved(config.kv.block_size).evicts();
  for (const KvCacheConfig& g : layout->groups) KVS_RETURN_IF_ERROR(model.supports_kv(g.spec, g.layer_window, evicts));
  auto kv = HybridKvManager::create(layout->groups);
  if (!kv) return kv.status();
  auto engine = std::unique_ptr<Engine>(
      new Engine(model, tokenizer, pool, config, std::move(layout).value(), std::move(kv).value()));
  const KvPolicyParams policy = config.kv.policy.resolved(engine->kv_->block_size());
  if (policy.evicts()) KVS_RETURN_IF_ERROR(policy.validate(model.config().context_length));
  if (config.kv.tiers.enabled()) KVS_RETURN_IF_ERROR(engine->attach_tiers());
  return engine;
}

Status Engine::attach_tiers() {
  KvTierConfig tiers = config_.kv.tiers;
  tiers.host_allocator = model_.kv_host_tier_allocator();
  auto stack = KvTierStack::create_or_without_disk(tiers, tier_format(storages_[0].spec()));
  if (!stack) return stack.status();
  if (*stack == nullptr) return Status::ok();
  tiers_ = std::move(stack).value();
  executor_->attach_tiers(&tiers_->host_slabs(), tiers_.get());
  return kv_->attach_tiers(tiers_.get());
}

Engine::~Engine() {
  if (tp_) tp_->stop();  // the workers return
  if (!tiers_ || !tiers_->disk()) return;
  kv_ops_.clear();
  plan_persist(kv_->group(0), *tiers_, kv_ops_);
  if (const auto persisted = executor_->apply(kv_ops_); !persisted) {  // what was written stays; the rest is lost
    log_line(config_.kv.tiers.log, fmt::format("the KV cache's blocks were not all written to the disk tier: {}",
                                               persisted.status().message()));
  }
}  // the disk tier finishes its writes as it closes

void Engine::lose_kv(const Status& why) {
  ++recorder_.totals().kv_transfers_lost_total;
  log_line(config_.kv.tiers.log,
           fmt::format("a KV move failed ({}): the cached blocks of the pool and the host tier are dropped and every "
                       "request computes its K/V again",
                       why.message()));
  kv_ops_.clear();
  (void)executor_->wait_for_transfers();  // what the device still moves lands before the blocks are reused
  kv_ops_done();
  scheduler_.requeue_all();
  kv_->forget_cached();
  if (tiers_) tiers_->forget_host();
}

bool Engine::apply_kv_ops() {
  if (tiers_) plan_tier_transfers(kv_->group(0).pending_transfers(), *tiers_, kv_ops_);
  for (size_t g = 0; g < kv_->num_groups(); ++g) {
    for (const KvBlockCopy& c : kv_->group(g).pending_copies()) {
      kv_ops_.push_back(KvCopySlots{.group = static_cast<uint32_t>(g),
                                    .from = c.source,
                                    .to = c.destination,
                                    .num_slots = static_cast<uint32_t>(c.num_slots),
                                    .from_tail = c.source_tail,
                                    .to_tail = c.destination_tail});
    }
  }
  if (!kv_ops_.empty() || tiers_) {  // with tiers, every step: what a device moved ahead is awaited from now on
    const auto applied = executor_->apply(kv_ops_);
    if (!applied) {
      lose_kv(applied.status());
      return false;
    }
    kv_ops_.clear();
    recorder_.totals().kv_transfers_retried_total += applied->retried;
    if (applied->tier_bytes > 0) {
      scheduler_.preemption_costs().copy_bytes.observe(static_cast<double>(applied->tier_bytes), applied->tier_seconds);
    }
  }
  kv_ops_done();
  return true;
}

void Engine::kv_ops_done() {
  if (tiers_) kv_->group(0).transfers_done();
  for (size_t g = 0; g < kv_->num_groups(); ++g) kv_->group(g).copies_done();
}

Engine::Engine(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, const EngineConfig& config,
               EngineKvLayout layout, std::unique_ptr<HybridKvManager> kv)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      clock_(config.clock ? *config.clock : steady_clock_),
      layers_(std::move(layout.layers)),
      kv_(std::move(kv)),
      scheduler_(
          {.max_batch_tokens = config.max_batch_tokens, .max_seqs = config.max_seqs, .preempt = config.kv_preempt},
          *kv_),
      runner_(model.make_runner(pool, config.mla_form)),
      evictor_(model),
      logits_processors_(tokenizer) {
  storages_.reserve(layout.groups.size());
  for (const KvCacheConfig& g : layout.groups) {
    if (KvAllocator* device = model.kv_allocator()) {
      storages_.emplace_back(g.spec, g.num_blocks, g.num_key_tails, *device);
    } else {
      storages_.emplace_back(g.spec, g.num_blocks, g.num_key_tails);
    }
  }
  kv_groups_ = layout.groups;
  auto host = std::make_unique<HostKvExecutor>(storages_, model_kv_head_share(model),
                                               model_key_rotation(model.config()), clock_);
  executor_ = model.make_kv_executor(storages_, std::move(host));
  const ModelConfig& c = model.config();
  capabilities_ = {.features = engine_features(model, config, {}),
                   .context_length = c.context_length,
                   .vocab_size = c.vocab_size,
                   .key_tails = kv_->group(0).key_tail_table().num_tails(),
                   .block_size = kv_->block_size(),
                   .default_policy = config.kv.policy,
                   .every_layer_windowed = layers_.groups[0].window > 0};
}

void Engine::attach_policy(Request& r, const KvPolicyParams& policy) const {
  if (!policy.evicts()) return;
  r.kv_policy = make_kv_eviction_policy(policy);
  r.kv_budget = policy.budget;
  r.use_prefix_cache = false;  // its blocks are rewritten by compactions: never shared (kv_cache_manager.h)
  if (r.kv_policy->needs_scores()) {
    const ModelConfig& c = model_.config();
    r.kv_scores = std::make_unique<SlotScores>(c.num_layers, c.num_kv_heads, policy.budget);
    r.slot_mass = r.kv_scores->view();
  }
}

size_t Engine::kv_storage_bytes() const {
  size_t total = 0;
  for (const KvStorage& s : storages_) total += s.bytes();
  return total;
}

Expected<SeqId> Engine::add_request(RequestParams params, OutputSink sink) {
  KVS_RETURN_IF_ERROR(params.validate(capabilities_));
  const KvPolicyParams policy = capabilities_.policy_of(params);
  const bool past_context = capabilities_.runs_past_context(params);
  // The prompt (plus the first generated token, when a second one follows it) must fit in the whole pool on its
  // own; a token past the context is never computed.
  size_t must_hold = params.prompt.size() + (params.max_new_tokens > 1 ? 1 : 0);
  if (!past_context) must_hold = std::min(must_hold, capabilities_.context_length);
  if (policy.evicts()) must_hold = std::min(must_hold, policy.budget);
  if (!kv_->fits_alone(must_hold, config_.max_batch_tokens)) {
    return Status::out_of_memory(fmt::format(
        "the prompt of {} tokens needs {} KV blocks of {} tokens but the whole pool has {} ({}); raise --kv-memory",
        params.prompt.size(), kv_blocks_for_tokens(must_hold, kv_->block_size()), kv_->block_size(),
        kv_->usage().blocks_total, layers_.describe()));
  }
  const SeqId id{next_id_++};
  auto request = std::make_unique<Request>(id, std::move(params), tokenizer_, std::move(sink), clock_.now());
  request->prefix_namespace = kv_->name_space(request->params.cache_salt);
  request->kv_window = request->params.kv_window;
  // The no-cache baseline recomputes; prompt logprobs need every prompt token's logits computed.
  request->use_prefix_cache = !request->params.recompute_history && !request->params.prompt_logprobs;
  request->num_forks = request->params.num_samples - 1;
  request->runs_past_context = past_context;
  attach_policy(*request, policy);
  request->logits_processor = logits_processors_.make(request->params);
  if (request->num_forks > 0) open_samples_.emplace(id.value, request->params.num_samples);
  scheduler_.add(request.get());
  recorder_.totals().prompt_tokens_total += request->num_prompt_tokens;
  requests_.emplace(id.value, std::move(request));
  return id;
}

void Engine::abort(SeqId id) {
  std::vector<Request*> samples;
  for (const auto& [seq, r] : requests_)
    if (r->request_id == id) samples.push_back(r.get());
  for (Request* r : samples) {
    RequestOutput out;
    finish(*r, FinishReason::kAborted, out);
  }
}

void Engine::abort_all() {
  std::vector<SeqId> ids;
  for (const auto& [seq, r] : requests_)
    if (std::ranges::find(ids, r->request_id) == ids.end()) ids.push_back(r->request_id);
  for (SeqId id : ids) abort(id);
}

void Engine::finish(Request& r, FinishReason reason, RequestOutput& out) {
  if (reason != FinishReason::kStopString && reason != FinishReason::kAborted) {
    out.text += r.stops.push(r.decoder.finish()).emit + r.stops.finish();
  }
  out.id = r.request_id;
  out.sample = r.sample;
  out.cumulative_logprob = r.cumulative_logprob;
  out.finished = true;
  out.finish_reason = reason;
  out.prompt_tokens = r.num_prompt_tokens;
  out.completion_tokens = r.num_generated();
  out.cached_tokens = r.num_cached_tokens;
  out.kv_blocks_held = kv_->num_blocks_held(r.id);
  out.kv_bytes_held = kv_->bytes_held(r.id);
  if (reason == FinishReason::kKvCacheFull) {
    out.finish_detail = fmt::format(
        "KV cache exhausted: the sequence of {} tokens needs {} blocks of {} tokens, but the whole pool has {} ({} "
        "bytes; {})",
        r.num_tokens(), kv_blocks_for_tokens(r.num_tokens(), kv_->block_size()), kv_->block_size(),
        kv_->usage().blocks_total, kv_->usage().bytes_total, layers_.describe());
  }
  scheduler_.remove(&r);  // blocks are freed the moment the request ends
  // Samples never forked (the prompt did not finish) end with it, having generated nothing.
  std::vector<RequestOutput> unforked(r.num_forks, out);
  for (size_t i = 0; i < unforked.size(); ++i) {
    unforked[i].sample = i + 1;
    unforked[i].text.clear();
    unforked[i].new_tokens.clear();
    unforked[i].completion_tokens = 0;
    unforked[i].cumulative_logprob = 0.0;
  }
  auto open = open_samples_.find(r.request_id.value);
  const bool request_ends = open == open_samples_.end() || (open->second -= 1 + r.num_forks) == 0;
  if (open != open_samples_.end() && request_ends) open_samples_.erase(open);
  if (request_ends) {
    ++(reason == FinishReason::kAborted ? recorder_.totals().requests_aborted_total
                                        : recorder_.totals().requests_finished_total);
  }
  if (r.sink) {
    r.sink(out);
    for (const RequestOutput& o : unforked) r.sink(o);
  }
  requests_.erase(r.id.value);
}

void Engine::fork_samples(Request& first, std::span<const float> logits, std::vector<PendingOutput>& outputs) {
  const size_t forks = std::exchange(first.num_forks, 0);
  for (size_t i = 1; i <= forks; ++i) {
    RequestParams params = first.params;
    params.sampling.seed += i;
    const SeqId id{next_id_++};
    auto sample = std::make_unique<Request>(id, std::move(params), tokenizer_, first.sink, first.arrival);
    sample->request_id = first.request_id;
    sample->sample = i;
    sample->prefix_namespace = first.prefix_namespace;
    sample->kv_window = first.kv_window;
    sample->use_prefix_cache = first.use_prefix_cache;
    sample->num_cached_tokens = first.num_cached_tokens;
    if (first.logits_processor) sample->logits_processor = first.logits_processor->fork();
    kv_->fork(first.id, id);
    scheduler_.add_running(sample.get());
    Request& forked = *sample;
    requests_.emplace(id.value, std::move(sample));
    advance(forked, logits, outputs);
  }
}

bool Engine::advance(Request& r, std::span<const float> logits, std::vector<PendingOutput>& outputs) {
  RequestOutput out;
  if (r.params.prompt_logprobs && !r.prompt_logprobs_sent) {
    out.prompt_logprobs = std::move(r.prompt_logprobs);
    r.prompt_logprobs_sent = true;
  }
  if (r.params.max_new_tokens == 0) {  // the prompt only
    finish(r, FinishReason::kLength, out);
    return true;
  }
  if (r.num_forks > 0) fork_samples(r, logits, outputs);  // before r's own token: they share its prompt
  std::span<const float> drawn_from = logits;
  if (r.logits_processor) {  // only the tokens it allows (logprobs stay the model's)
    constrained_logits_.assign(logits.begin(), logits.end());
    // After this token: what max_tokens and the context leave (an output must be whole within them).
    const auto after = [](size_t limit, size_t used) { return limit > used + 1 ? limit - used - 1 : 0; };
    size_t left = after(r.params.max_new_tokens, r.num_generated());
    if (!r.runs_past_context) left = std::min(left, after(model_.config().context_length, r.num_tokens()));
    if (Status masked = r.logits_processor->mask(constrained_logits_, left); !masked) {
      out.error = std::move(masked);
      finish(r, FinishReason::kAborted, out);
      return true;
    }
    drawn_from = constrained_logits_;
  }
  const TokenId token =
      r.sampler.sample(drawn_from, r.tokens, std::span<const TokenId>(r.tokens).subspan(r.num_prompt_tokens));
  if (r.logits_processor) r.logits_processor->accept(token);
  if (r.params.track_logprob) r.cumulative_logprob += token_logprob(logits, token);
  const SteadyTime now = clock_.now();
  EngineMetrics& m = recorder_.totals();
  if (!r.has_first_token) {  // a request's first token is its first sample's
    if (r.sample == 0) m.time_to_first_token_seconds.observe(seconds_between(r.arrival, now));
    r.has_first_token = true;
  } else {
    m.inter_token_latency_seconds.observe(seconds_between(r.last_token_time, now));
  }
  r.last_token_time = now;
  out.id = r.request_id;
  out.sample = r.sample;
  if (r.params.stop_at_eos && tokenizer_.is_end_of_generation(token)) {
    finish(r, FinishReason::kEos, out);
    return true;
  }
  r.tokens.push_back(token);
  ++m.generation_tokens_total;
  out.new_tokens.push_back(token);
  if (r.params.logprobs) out.logprobs.push_back(token_logprob_entry(logits, token, *r.params.logprobs));
  const auto matched = r.stops.push(r.decoder.push(token));
  out.text = matched.emit;
  out.cumulative_logprob = r.cumulative_logprob;
  if (matched.stopped) {
    finish(r, FinishReason::kStopString, out);
  } else if (r.logits_processor && r.logits_processor->complete()) {
    finish(r, FinishReason::kDocumentComplete, out);
  } else if (r.num_generated() >= r.params.max_new_tokens) {
    finish(r, FinishReason::kLength, out);
  } else if (!r.runs_past_context && r.num_tokens() >= model_.config().context_length) {
    finish(r, FinishReason::kContextFull, out);
  } else {
    if (r.params.recompute_history) scheduler_.forget_computed(&r);  // the no-cache baseline
    outputs.push_back({r.id, std::move(out)});
    return false;
  }
  return true;
}

bool Engine::step() {
  if (requests_.empty()) return false;
  // Caches at their budget make room first: the blocks they free are free for this step.
  for (SequenceState* seq : scheduler_.running()) {
    if (evictor_.evict_if_full(as_request(seq), *kv_, kv_ops_) > 0) ++recorder_.totals().kv_evictions_total;
  }
  if (tiers_ && !prefetch_waiting()) return true;  // the KV cache was lost: the next step computes it again
  SchedulePlan plan = scheduler_.schedule();
  recorder_.totals().preemptions_total = scheduler_.num_preemptions();
  for (SequenceState* seq : plan.out_of_memory) {
    RequestOutput out;
    finish(as_request(seq), FinishReason::kKvCacheFull, out);
  }
  // Before the forward pass writes the blocks (a demotion reads their old content). When the log failed, the plan's
  // blocks are gone: the next step schedules the requests again.
  if (!apply_kv_ops()) return true;
  if (plan.chunks.empty()) {
    if (tiers_ && tiers_->num_prefetching() > 0) {  // only reads from disk are left to wait for
      const SteadyTime start = clock_.now();
      tiers_->wait_for_prefetch(std::chrono::milliseconds(50));
      recorder_.totals().kv_load_stall_seconds_sum += std::chrono::duration<double>(clock_.now() - start).count();
      return true;
    }
    return !plan.out_of_memory.empty() || !plan.preempted.empty();
  }

  for (const ScheduledChunk& chunk : plan.chunks) {  // a sequence (re)starting from nothing starts with no scores
    Request& r = as_request(chunk.seq);
    if (chunk.first == 0 && r.kv_scores) r.kv_scores->clear();
  }
  build_model_input(plan.chunks, *kv_, layers_, input_);
  const size_t vocab = model_.config().vocab_size;
  logits_.resize(input_.logits_for.size() * vocab);
  const SteadyTime forward_start = clock_.now();
  const ForwardBatch batch = input_.view();
  try {
    runner_->forward(batch, storages_, logits_);
  } catch (const DeviceFault& fault) {
    // Nothing of the step was computed: its requests end with the fault's message; the others go on.
    for (const ScheduledChunk& chunk : plan.chunks) {
      RequestOutput out;
      out.finish_detail = fault.what();
      finish(as_request(chunk.seq), FinishReason::kDeviceError, out);
    }
    return true;
  }
  // The prefill rate a preempted sequence would be recomputed at: steps of prefill-sized batches.
  if (input_.tokens.size() >= kPrefillRateTokens) {
    scheduler_.preemption_costs().recompute_tokens.observe(static_cast<double>(input_.tokens.size()),
                                                           seconds_between(forward_start, clock_.now()));
  }
  recorder_.totals().step_tokens.observe(static_cast<double>(input_.tokens.size()));

  // Account, sample, stream. Outputs go out after the bookkeeping so a sink sees a consistent engine.
  for (const ScheduledChunk& chunk : plan.chunks) scheduler_.on_computed(chunk);
  std::vector<PendingOutput> outputs;
  for (size_t row = 0; row < input_.logits_rows.size(); ++row) {
    const ModelInput::LogitsRow& at = input_.logits_rows[row];
    Request& r = as_request(plan.chunks[at.chunk].seq);
    const std::span<const float> logits(logits_.data() + row * vocab, vocab);
    if (r.params.on_logits) r.params.on_logits(at.position, logits);
    // Prompt logprobs: this row predicts prompt token position + 1 (each once, were the prompt recomputed).
    if (r.params.prompt_logprobs && !r.prompt_logprobs_sent && at.position + 1 < r.num_prompt_tokens &&
        at.position == r.prompt_logprobs.size()) {
      r.prompt_logprobs.push_back(token_logprob_entry(logits, r.tokens[at.position + 1], *r.params.prompt_logprobs));
    }
    if (at.samples) advance(r, logits, outputs);
  }
  for (const PendingOutput& pending : outputs) {
    auto it = requests_.find(pending.seq.value);
    if (it != requests_.end() && it->second->sink) it->second->sink(pending.output);
  }
  return true;
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m = recorder_.totals();
  m.requests_running = scheduler_.running().size();
  m.requests_waiting = scheduler_.waiting().size();
  const KvUsage u = kv_->usage();
  m.kv_blocks_total = u.blocks_total;
  m.kv_blocks_used = u.blocks_used;
  m.kv_blocks_used_peak = u.blocks_used_peak;
  m.kv_copy_on_write_total = kv_->num_copy_on_write();
  m.kv_evicted_tokens_total = kv_->num_evicted_total();
  m.kv_usage_ratio = u.blocks_total ? static_cast<double>(u.blocks_used) / static_cast<double>(u.blocks_total) : 0.0;
  m.preemptions_total = scheduler_.num_preemptions();
  m.preemptions_swapped_total = scheduler_.num_swapped();
  m.preempted_tokens_recomputed_total = scheduler_.num_recomputed_tokens();
  const PreemptionCosts& costs = scheduler_.preemption_costs();
  m.kv_copy_bytes_per_second = costs.copy_bytes.per_second();
  m.recompute_tokens_per_second = costs.recompute_tokens.per_second();
  m.kv_blocks_cached_idle = u.blocks_cached_idle;
  const PrefixCacheStats p = kv_->prefix_stats();
  m.prefix_cache_queries_tokens_total = p.queried_tokens;
  m.prefix_cache_hits_tokens_total = p.hit_tokens;
  m.prefix_cache_copied_tokens_total = p.copied_tokens;
  m.prefix_cache_evictions_total = p.evictions;
  m.prefix_cache_tier_hits_tokens_total = p.tier_hit_tokens;
  m.kv_demoted_blocks_total = p.demoted_blocks;
  if (tiers_) {
    const auto add = [&](std::string tier, const TierStats& s) {
      m.kv_tiers.push_back(KvTierMetrics{s, std::move(tier)});
    };
    add("host", tiers_->host().stats());
    if (tiers_->disk()) add("disk", tiers_->disk()->stats());
  }
  return m;
}

}  // namespace kvs
