#include "bench/bench_measure.h"

#include <fmt/format.h>

#include <algorithm>

#include "kv/kv_sizing.h"

namespace kvs {

BenchModelInfo describe_model(const DecoderModel& model, const std::string& path) {
  const ModelConfig& c = model.config();
  const DecoderWeights& w = model.weights();
  BenchModelInfo info{.path = path,
                      .weight_type = std::string(dtype_name(w.layers.empty() ? w.output.type : w.layers[0].wq.type)),
                      .weight_layout = w.layers.empty() || !is_packed(w.layers[0].wq.layout)
                                           ? "gguf"
                                           : weight_layout_name(w.layers[0].wq.layout),
                      .layers = c.num_layers,
                      .dim = c.dim,
                      .heads = c.num_heads,
                      .kv_heads = c.num_kv_heads,
                      .head_dim = c.head_dim,
                      .ffn = c.ffn_dim,
                      .vocab = c.vocab_size,
                      .context = c.context_length,
                      .matrix_bytes = w.matrix_bytes(),
                      .output_params = w.output.rows * w.output.cols,
                      .tensor_parallel = model.tensor_parallel_size()};
  for (const DecoderLayerWeights& l : w.layers) {
    for (const WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      info.layer_params += m->rows * m->cols;
    }
  }
  const KvCacheSpec spec{.num_layers = c.num_layers,
                         .num_kv_heads = model.shard_config().num_kv_heads,
                         .head_dim = c.head_dim,
                         .block_size = 1};
  info.kv_bytes_per_token = kv_bytes_per_block(spec).total();
  return info;
}

std::vector<TokenId> bench_tokens(size_t n, size_t vocab, uint64_t seed) {
  constexpr size_t kFirst = 3;  // past the special tokens
  const uint64_t range = vocab > kFirst ? vocab - kFirst : 1;
  uint64_t state = seed;
  std::vector<TokenId> tokens(n);
  for (TokenId& t : tokens) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    t = static_cast<TokenId>(std::min<uint64_t>(kFirst + z % range, vocab - 1));
  }
  return tokens;
}

Expected<TimedRun> timed_run(Engine& engine, std::span<const TokenId> prompt, size_t warm_steps, size_t steps,
                             const BenchClock& now, bool recompute_history) {
  RequestParams params{.prompt = {prompt.begin(), prompt.end()},
                       .max_new_tokens = 1 + warm_steps + steps,
                       .sampling = {.temperature = 0.0f},
                       .stop_at_eos = false,
                       .recompute_history = recompute_history};
  size_t generated = 0;
  bool finished = false;
  Status error;
  size_t bytes_held = 0;
  auto id = engine.add_request(std::move(params), [&](const RequestOutput& out) {
    generated += out.new_tokens.size();
    if (out.finished) bytes_held = out.kv_bytes_held;
    finished = finished || out.finished;
    if (out.finished && out.finish_reason != FinishReason::kLength)
      error = Status::out_of_range(
          fmt::format("benchmark request of {} prompt tokens ended early ({}{})", prompt.size(),
                      finish_reason_name(out.finish_reason),
                      out.finish_reason == FinishReason::kContextFull ? ": the context is full" : ""));
  });
  if (!id) return id.status();
  // Steps the engine until the request has generated `target` tokens (or ended); false if the engine idled.
  const auto step_until = [&](size_t target) {
    while (generated < target && !finished) {
      if (!engine.step()) return false;
    }
    return true;
  };
  TimedRun run;
  const double start = now();
  step_until(1);
  run.prefill_seconds = now() - start;
  step_until(1 + warm_steps);
  // A timed step is the time to the next token: one engine step with the cache, several without it
  // (recompute_history recomputes the whole history, in chunks of the batch budget).
  for (size_t i = 0; i < steps && !finished; ++i) {
    const double step_start = now();
    if (!step_until(generated + 1)) break;
    run.step_seconds.push_back(now() - step_start);
  }
  KVS_RETURN_IF_ERROR(error);
  step_until(SIZE_MAX);  // to the end, where the bytes held are reported
  run.kv_bytes_held = bytes_held;
  if (run.step_seconds.size() != steps) {
    return Status::out_of_range(
        fmt::format("benchmark request took {} timed tokens, not {}", run.step_seconds.size(), steps));
  }
  return run;
}

Expected<DecodeRates> decode_at_depth(Engine& engine, std::span<const TokenId> context, size_t depth, TokenId first,
                                      size_t tokens, const BenchClock& now) {
  std::vector<TokenId> prompt(context.begin(), context.begin() + static_cast<long>(depth > 0 ? depth - 1 : 0));
  prompt.push_back(first);
  auto run = timed_run(engine, prompt, 0, tokens, now);
  if (!run) return run.status();
  double total = 0.0;
  for (double s : run->step_seconds) total += s;
  return DecodeRates{.tok_s = static_cast<double>(run->step_seconds.size()) / total,
                     .median_tok_s = 1.0 / median(run->step_seconds),
                     .kv_bytes_held = run->kv_bytes_held};
}

std::string KvVariant::name() const {
  std::string n = kv_dtypes_name(dtype);
  if (window > 0) n += fmt::format("@w{}", window);
  if (!hybrid) n += "@global";
  if (mla_form != MlaForm::kAuto) n += fmt::format("@{}", mla_form_name(mla_form));
  return n;
}

Expected<BenchEngine> bench_engine(const DecoderModel& model, ThreadPool& pool, size_t capacity, KvLayout layout,
                                   const BenchPlan& plan, const KvVariant& kv, bool prefix_caching,
                                   const Model* runs_on) {
  auto tokenizer = Tokenizer::from_gguf(model.file());
  if (!tokenizer) return tokenizer.status();
  BenchEngine out{.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value()), .engine = nullptr};
  EngineConfig config{.max_batch_tokens = plan.max_batch_tokens,
                      .max_seqs = 1,
                      .kv = {.block_size = plan.paging_block_size,
                             .layout = layout,
                             .dtype = kv.dtype,
                             .prefix_caching = prefix_caching,
                             .window = kv.window,
                             .hybrid = kv.hybrid},
                      .mla_form = kv.mla_form};
  const Model& engine_model = runs_on ? *runs_on : static_cast<const Model&>(model);
  config.kv.blocks = kv_blocks_for_tokens(capacity, engine_block_size(engine_model, config));
  auto engine = Engine::create(engine_model, *out.tokenizer, pool, config);
  if (!engine) return engine.status();
  out.engine = std::move(engine).value();
  return out;
}

size_t bench_step_count(const BenchPlan& p, bool extra_prefill) {
  const size_t prefill = 1 + p.reps * p.prefill_tokens.size();  // warm-up + runs
  const size_t peak_probes = 2;
  const size_t decode = p.decode_depths.size() * p.reps * 2 + 1;  // A/B runs, last probe
  const size_t cache = p.cache_contexts.size() * p.reps * 2;
  const size_t paging = 1;
  return peak_probes + prefill * (extra_prefill ? 2 : 1) + decode + cache + paging;
}

}  // namespace kvs
