#include "gpu/gpu_decoder_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "gpu/key_groups.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

constexpr uint32_t kHole = 0xffffffffu;

}  // namespace

GpuDecoderRunner::GpuDecoderRunner(const GpuDecoderModel& model, MlaForm mla_form)
    : model_(model),
      mla_form_(mla_form),
      tp_(model.communicator() != nullptr && model.communicator()->size() > 1 ? model.communicator() : nullptr),
      inv_freq_(model.shard_config().rope_frequencies()),
      local_inv_freq_(model.shard_config().is_gemma3() ? model.shard_config().rope_frequencies(true)
                                                       : std::vector<float>()) {
  auto ops = GpuOps::create(model.context());
  check(ops ? Status::ok() : ops.status(), "creating the GPU pipelines");
  ops_ = std::move(*ops);
  if (GpuProfile* profile = model.profile()) check(ops_->recorder().set_profile(profile), "turning on --profile");
}

void GpuDecoderRunner::check(const Status& s, const char* what) {
  if (s) return;
  // The step is dropped (nothing of it was submitted, or it failed on the device): the engine ends its requests.
  if (ops_) ops_->recorder().abandon();
  throw DeviceFault(fmt::format("the GPU forward failed {}: {}", what, s.message()));
}

GpuBuffer& GpuDecoderRunner::ensure(std::unique_ptr<GpuBuffer>& slot, size_t bytes, GpuMemory memory) {
  bytes = std::max<size_t>(bytes, 16);
  const uint64_t range = model_.context().info().max_storage_buffer_range;
  if (bytes > range) {  // a binding spans at most `range` bytes: a larger buffer would be read past its end
    check(Status::out_of_memory(fmt::format("a step buffer of {} bytes exceeds one storage binding of {} ({} bytes): "
                                            "fewer tokens a step (--max-batch-tokens) fit",
                                            bytes, model_.context().info().name, range)),
          "sizing the step");
  }
  if (!slot || slot->bytes() < bytes) {
    slot.reset();
    const size_t grown = std::min<size_t>(bytes + bytes / 2, range);  // headroom: fewer reallocations
    auto buffer = GpuBuffer::create(model_.context(), grown, memory);
    check(buffer ? Status::ok() : buffer.status(), "allocating a step buffer");
    slot = std::move(*buffer);
  }
  return *slot;
}

template <class T>
GpuBuffer& GpuDecoderRunner::upload(std::unique_ptr<GpuBuffer>& slot, const std::vector<T>& values) {
  GpuBuffer& b = ensure(slot, values.size() * sizeof(T), GpuMemory::kHostVisible);
  if (!values.empty()) std::memcpy(b.mapped().data(), values.data(), values.size() * sizeof(T));
  return b;
}

// gpu_decoder_runner_mla.cpp's uploads.
template GpuBuffer& GpuDecoderRunner::upload<uint32_t>(std::unique_ptr<GpuBuffer>&, const std::vector<uint32_t>&);

void GpuDecoderRunner::matvec(const GpuMatrix& w, GpuBuffer& x, GpuBuffer& y, size_t n) {
  for (const GpuMatrixPart& part : w.parts) {
    check(ops_->matvec(w.type, *part.buffer, x, y, part.rows, w.cols, static_cast<uint32_t>(n), w.rows, part.first_row),
          "in a matrix product");
  }
}

GpuBuffer& GpuDecoderRunner::pool(const KvStorage& storage, size_t layer, bool keys) const {
  const KvRows rows = keys ? storage.keys(layer, BlockId{0}, 0) : storage.values(layer, BlockId{0}, 0);
  GpuBuffer* buffer = model_.allocator().buffer_at(rows.data);
  KVS_ASSERT(buffer != nullptr, "layer {}'s {} pool is not in device memory (the engine's KV allocator)", layer,
             keys ? "K" : "V");
  return *buffer;
}

GpuBuffer& GpuDecoderRunner::key_tails(const KvStorage& storage) const {
  GpuBuffer* buffer = model_.allocator().buffer_at(storage.key_tail_rows(0, 0, 0).data);
  KVS_ASSERT(buffer != nullptr, "the key tails are not in device memory (the engine's KV allocator)");
  return *buffer;
}

void GpuDecoderRunner::forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) {
  const ModelConfig& c = model_.shard_config();
  const size_t n = batch.tokens.size(), m = batch.logits_for.size();
  if (n == 0) return;
  KVS_ASSERT(batch.positions.size() == n && batch.layers && batch.kv.size() == kv.size(),
             "a batch of {} tokens, {} positions, {} group batches for {} storages", n, batch.positions.size(),
             batch.kv.size(), kv.size());
  KVS_ASSERT((tp_ && tp_->rank() != 0) || logits.size() >= m * c.vocab_size, "logits buffer {} < {} x {}",
             logits.size(), m, c.vocab_size);  // only rank 0 gets logits
  const uint32_t tokens = static_cast<uint32_t>(n);
  constexpr GpuMemory kDevice = GpuMemory::kDeviceLocal;
  GpuBuffer& x = ensure(x_, n * c.dim * 4, kDevice);
  GpuBuffer& xb = ensure(xb_, n * c.dim * 4, kDevice);
  ensure(q_, n * c.q_dim() * 4, kDevice);
  ensure(k_, n * c.kv_dim() * 4, kDevice);
  ensure(v_, n * c.kv_dim() * 4, kDevice);
  GpuBuffer& att = ensure(att_, n * std::max(c.q_dim(), c.num_heads * c.mla.value_dim) * 4, kDevice);
  GpuBuffer& proj = ensure(proj_, n * c.dim * 4, kDevice);
  // The dense FFN's hidden states, or a mixture's shared experts'.
  const size_t hidden = std::max(c.ffn_dim, c.moe.shared_experts * c.moe.expert_ffn_dim);
  GpuBuffer& gate = ensure(gate_, n * hidden * 4, kDevice);
  GpuBuffer& up = ensure(up_, n * hidden * 4, kDevice);

  // Per step: token ids, the RoPE angles of each position (the host's tables, as the CPU forward computes them; Gemma
  // 3's window layers have tables of their own).
  std::vector<uint32_t> ids(n);
  for (size_t t = 0; t < n; ++t) {
    KVS_ASSERT(batch.tokens[t] >= 0 && static_cast<size_t>(batch.tokens[t]) < c.vocab_size,
               "token id {} outside vocabulary of {}", batch.tokens[t], c.vocab_size);
    ids[t] = static_cast<uint32_t>(batch.tokens[t]);
  }
  GpuBuffer& id_buffer = upload(ids_, ids);
  RopeBuffers& global_rope = upload_rope(global_rope_, inv_freq_, batch.positions);
  RopeBuffers& local_rope =
      local_inv_freq_.empty() ? global_rope : upload_rope(local_rope_, local_inv_freq_, batch.positions);
  // Per layer group: each token's slot, each sequence's block table (holes marked), each token's (sequence, visible).
  groups_.resize(kv.size());
  for (size_t g = 0; g < kv.size(); ++g) {
    const KvGroupBatch& group = batch.kv[g];
    const AttentionBatch& a = group.attention;
    GroupBuffers& gb = groups_[g];
    std::vector<uint32_t> slots(n), token_info(4 * n);
    gb.max_blocks = 1;
    gb.max_slots = 1;
    for (const SequenceAttention& s : a.sequences) gb.max_blocks = std::max<uint32_t>(gb.max_blocks, s.blocks.size());
    std::vector<uint32_t> tables(a.sequences.size() * gb.max_blocks, kHole);
    for (size_t s = 0; s < a.sequences.size(); ++s) {
      for (size_t b = 0; b < a.sequences[s].blocks.size(); ++b) {
        const BlockId block = a.sequences[s].blocks[b];
        tables[s * gb.max_blocks + b] = block == kNullBlock ? kHole : block.value;
      }
    }
    for (size_t t = 0; t < n; ++t) {
      slots[t] = static_cast<uint32_t>(group.kv_slots[t].value);
      token_info[4 * t] = a.sequence_of_token[t];
      token_info[4 * t + 1] = a.visible_slots[t];
      token_info[4 * t + 2] = a.sequences[a.sequence_of_token[t]].window;
      gb.max_slots = std::max(gb.max_slots, a.visible_slots[t]);
    }
    upload(gb.slots, slots);
    upload(gb.tables, tables);
    upload(gb.tokens, token_info);
    plan_slot_mass(a, kv[g].format(), gb);
    const KvTensorFormat& keys = kv[g].format().k;
    gb.num_seals = 0;
    if (keys.scale_axis == KvScaleAxis::kPerChannel) {  // where each key row goes, and each sequence's filling group
      const KeyGroupPlan plan = plan_key_groups(keys, group.kv_slots, a.key_tails);
      std::vector<uint32_t> sequence_tails(2 * std::max<size_t>(a.sequences.size(), 1), kNoKeyTail);
      for (size_t s = 0; s < a.sequences.size(); ++s) {
        const SequenceAttention& seq = a.sequences[s];
        if (const size_t rows = keys.tail_rows(seq.num_cached); rows > 0) {
          const BlockId block = seq.blocks[seq.num_cached / keys.rows];
          KVS_ASSERT(block.value < a.key_tails.size() && a.key_tails[block.value] != kNoKeyTail,
                     "the filling key group of {} rows in block {} has no key tail", rows, block.value);
          sequence_tails[2 * s] = a.key_tails[block.value];
          sequence_tails[2 * s + 1] = seq.num_cached - static_cast<uint32_t>(rows);
        }
      }
      upload(gb.tail_of_token, plan.tail_of_token);
      upload(gb.seals, plan.seals);
      upload(gb.sequence_tails, sequence_tails);
      gb.num_seals = static_cast<uint32_t>(plan.num_seals());
    }
  }
  size_t scores = 0;
  for (const GroupBuffers& gb : groups_) scores = std::max<size_t>(scores, size_t{gb.max_slots} * n * c.num_heads);
  GpuBuffer& score_buffer = ensure(scores_, scores * 4, kDevice);
  // The rows whose logits are wanted, gathered, normed and through the output matrix.
  std::vector<uint32_t> wanted(batch.logits_for.begin(), batch.logits_for.end());
  for (uint32_t t : wanted) KVS_ASSERT(t < n, "logits requested for token {} of a batch of {}", t, n);
  GpuBuffer& wanted_buffer = upload(wanted_, wanted);
  GpuBuffer& rows = ensure(final_, m * c.dim * 4, kDevice);
  GpuBuffer& normed = ensure(normed_, m * c.dim * 4, kDevice);
  const size_t vocab = model_.output().rows;  // this rank's slice under tensor parallelism, else the vocabulary
  GpuBuffer& out = ensure(logits_, m * vocab * 4, kDevice);

  // The step, recorded as one submission: every buffer it names is allocated and filled above.
  check(ops_->begin_step(), "starting a step");

  const GpuMatrix& embedding = model_.embedding();
  for (const GpuMatrixPart& part : embedding.parts) {
    check(ops_->get_rows(embedding.type, *part.buffer, id_buffer, x, tokens, embedding.cols, part.first_row, part.rows),
          "in the embedding");
  }
  const uint32_t dim = static_cast<uint32_t>(c.dim);
  if (c.embedding_scale != 1.0f) check(ops_->scale(x, tokens * dim, c.embedding_scale), "scaling the embedding");
  for (size_t l = 0; l < c.num_layers; ++l) {
    const GpuLayerWeights& w = model_.layers()[l];
    check(ops_->rmsnorm(x, *w.attn_norm, xb, tokens, dim, c.rms_eps), "in RMSNorm");
    if (c.is_mla()) {
      mla_attention(w, batch, kv, l, xb, score_buffer, att);
    } else {
      attention(w, batch, kv, l, xb, score_buffer, att, c.window_of(l) > 0 ? local_rope : global_rope);
    }
    matvec(w.wo, att, proj, n);
    sum_over_ranks(proj, n);
    add_to_residual(x, proj, w.post_attention_norm.get(), xb, tokens);
    check(ops_->rmsnorm(x, *w.ffn_norm, xb, tokens, dim, c.rms_eps), "in RMSNorm");
    if (c.moe.is_moe_layer(l)) {
      moe_ffn(w, xb, proj, n);
    } else {
      matvec(w.w_gate, xb, gate, n);
      matvec(w.w_up, xb, up, n);
      if (c.is_gemma3()) {
        check(ops_->geglu(gate, up, tokens * c.ffn_dim), "in GeGLU");
      } else {
        check(ops_->swiglu(gate, up, tokens * c.ffn_dim), "in SwiGLU");
      }
      matvec(w.w_down, gate, proj, n);
    }
    sum_over_ranks(proj, n);
    add_to_residual(x, proj, w.post_ffw_norm.get(), xb, tokens);
  }
  if (m > 0) {
    check(ops_->get_rows(DType::kF32, x, wanted_buffer, rows, static_cast<uint32_t>(m), dim), "gathering rows");
    check(ops_->rmsnorm(rows, model_.output_norm(), normed, static_cast<uint32_t>(m), dim, c.rms_eps), "in RMSNorm");
    matvec(model_.output(), normed, out, m);
  }
  check(ops_->end_step(), "running the step");
  for (GroupBuffers& gb : groups_) add_slot_mass(gb);
  if (m == 0) return;
  if (tp_) {
    // This rank's vocabulary slice, gathered to rank 0 and put in place rank after rank (the CPU forward's order).
    local_logits_.resize(m * vocab);
    check(out.download(std::as_writable_bytes(std::span(local_logits_))), "copying the logits back");
    const bool root = tp_->rank() == 0;
    const size_t ranks = tp_->size(), v = c.vocab_size;
    if (root) gathered_logits_.resize(m * v);
    timed([&] { tp_->gather(local_logits_, root ? std::span<float>(gathered_logits_) : std::span<float>(), 0); });
    if (!root) return;
    for (size_t r = 0, at = 0; r < ranks; ++r) {
      const size_t first = v * r / ranks, width = v * (r + 1) / ranks - first;
      for (size_t i = 0; i < m; ++i, at += width) std::copy_n(&gathered_logits_[at], width, &logits[i * v + first]);
    }
  } else {
    check(out.download(std::as_writable_bytes(logits.first(m * c.vocab_size))), "copying the logits back");
  }
  if (const float cap = c.final_logit_softcap; cap > 0.0f) {  // Gemma 2's soft cap, if a file asks for it: as the CPU
    for (float& logit : logits.first(m * c.vocab_size)) logit = cap * std::tanh(logit / cap);
  }
}

void GpuDecoderRunner::attention(const GpuLayerWeights& w, const ForwardBatch& batch, std::span<KvStorage> kv, size_t l,
                                 GpuBuffer& xb, GpuBuffer& score_buffer, GpuBuffer& att, RopeBuffers& rope) {
  const ModelConfig& c = model_.shard_config();
  const size_t n = batch.tokens.size(), half = inv_freq_.size();
  const uint32_t tokens = static_cast<uint32_t>(n), hd = static_cast<uint32_t>(c.head_dim);
  const bool neox = c.rope_style == RopeStyle::kNeox;
  // The CPU's Gemma scales q by attention_scale x sqrt(head_dim) and divides scores by sqrt(head_dim): one factor here.
  const float attention_scale = c.attention_scale > 0.0f ? c.attention_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  GpuBuffer &q = *q_, &k = *k_, &v = *v_;
  matvec(w.wq, xb, q, n);
  matvec(w.wk, xb, k, n);
  matvec(w.wv, xb, v, n);
  if (w.bq) {
    check(ops_->add(q, *w.bq, tokens * c.q_dim(), c.q_dim()), "adding the Q bias");
    check(ops_->add(k, *w.bk, tokens * c.kv_dim(), c.kv_dim()), "adding the K bias");
    check(ops_->add(v, *w.bv, tokens * c.kv_dim(), c.kv_dim()), "adding the V bias");
  }
  if (w.q_norm) {  // Gemma: each query and key head normed in place
    check(ops_->rmsnorm(q, *w.q_norm, q, tokens * static_cast<uint32_t>(c.num_heads), hd, c.rms_eps),
          "in the query norm");
    check(ops_->rmsnorm(k, *w.k_norm, k, tokens * static_cast<uint32_t>(c.num_kv_heads), hd, c.rms_eps),
          "in the key norm");
  }
  check(ops_->rope(q, *rope.cos, *rope.sin, tokens, c.num_heads, hd, half, neox), "in RoPE");
  check(ops_->rope(k, *rope.cos, *rope.sin, tokens, c.num_kv_heads, hd, half, neox), "in RoPE");
  const size_t g = batch.layers->group_of[l], at = batch.layers->index_in_group[l];
  KvStorage& storage = kv[g];
  const KvFormat& format = storage.format();
  GroupBuffers& gb = groups_[g];
  GpuBuffer &keys = pool(storage, at, true), &values = pool(storage, at, false);
  const uint32_t block = static_cast<uint32_t>(storage.block_size());
  if (format.k.rotated) {  // keys stored as H k and attended by H q (the CPU's write path and attention)
    check(ops_->hadamard(k, tokens * static_cast<uint32_t>(c.num_kv_heads), hd), "rotating keys");
    check(ops_->hadamard(q, tokens * static_cast<uint32_t>(c.num_heads), hd), "rotating queries");
  }
  GpuOps::KeyTails tails{.tail_of_token = gb.tail_of_token.get(),
                         .seals = gb.seals.get(),
                         .num_seals = gb.num_seals,
                         .sequence_tails = gb.sequence_tails.get(),
                         .layer = static_cast<uint32_t>(at),
                         .num_layers = static_cast<uint32_t>(format.num_layers)};
  if (format.has_key_tails()) tails.tails = storage.num_key_tails() > 0 ? &key_tails(storage) : gb.tables.get();
  check(ops_->kv_write(format.k, k, keys, *gb.slots, tokens, c.num_kv_heads, &tails), "writing K");
  check(ops_->kv_write(*format.v, v, values, *gb.slots, tokens, c.num_kv_heads), "writing V");
  const GpuOps::AttentionShape shape{.heads = static_cast<uint32_t>(c.num_heads),
                                     .kv_heads = static_cast<uint32_t>(c.num_kv_heads),
                                     .head_dim = hd,
                                     .value_width = hd,
                                     .block_size = block,
                                     .max_blocks = gb.max_blocks,
                                     .max_slots = gb.max_slots,
                                     .scale = attention_scale,
                                     .window = batch.layers->attention_window[l]};
  check(ops_->paged_attention(format.k, *format.v, q, keys, values, *gb.tables, *gb.tokens, score_buffer, att, tokens,
                              shape, &tails),
        "in attention");
  sum_slot_mass(gb, score_buffer, shape, at);
}

void GpuDecoderRunner::sum_slot_mass(GroupBuffers& gb, GpuBuffer& score_buffer, const GpuOps::AttentionShape& shape,
                                     size_t layer) {
  if (gb.mass_targets.empty()) return;
  check(ops_->slot_mass(score_buffer, *gb.tokens, *gb.mass_sequences, *gb.mass_tokens, *gb.mass,
                        static_cast<uint32_t>(gb.mass_targets.size()), gb.mass_slots, shape,
                        static_cast<uint32_t>(layer)),
        "summing the slot mass");
}

void GpuDecoderRunner::plan_slot_mass(const AttentionBatch& a, const KvFormat& format, GroupBuffers& gb) {
  gb.mass_targets.clear();
  gb.mass_slots = 0;
  std::vector<uint32_t> target_of(a.sequences.size(), kHole);
  uint32_t pairs = 0;
  for (size_t s = 0; s < a.sequences.size(); ++s) {
    const SequenceAttention& seq = a.sequences[s];
    if (!seq.slot_mass) continue;
    // Under tensor parallelism the rows are the model's KV heads and the view starts at this rank's first.
    KVS_ASSERT(seq.slot_mass.capacity >= seq.num_cached && seq.slot_mass.num_kv_heads >= format.num_heads,
               "slot mass of {} slots and {} KV heads for a sequence of {} slots and {} KV heads",
               seq.slot_mass.capacity, seq.slot_mass.num_kv_heads, seq.num_cached, format.num_heads);
    target_of[s] = static_cast<uint32_t>(gb.mass_targets.size());
    gb.mass_targets.push_back({.mass = seq.slot_mass,
                               .first_pair = pairs,
                               .slots = seq.num_cached,
                               .layers = static_cast<uint32_t>(format.num_layers),
                               .heads = static_cast<uint32_t>(format.num_heads)});
    pairs += static_cast<uint32_t>(format.num_layers * format.num_heads) * seq.num_cached;
    gb.mass_slots = std::max(gb.mass_slots, seq.num_cached);
  }
  if (gb.mass_targets.empty()) return;
  // Each sequence's tokens, in batch order, and its 4 words: first pair, stride, its range of the token list.
  std::vector<std::vector<uint32_t>> tokens_of(gb.mass_targets.size());
  for (size_t t = 0; t < a.sequence_of_token.size(); ++t) {
    if (const uint32_t target = target_of[a.sequence_of_token[t]]; target != kHole) {
      tokens_of[target].push_back(static_cast<uint32_t>(t));
    }
  }
  std::vector<uint32_t> sequences, token_list;
  for (size_t i = 0; i < gb.mass_targets.size(); ++i) {
    const uint32_t begin = static_cast<uint32_t>(token_list.size());
    token_list.insert(token_list.end(), tokens_of[i].begin(), tokens_of[i].end());
    sequences.insert(sequences.end(), {gb.mass_targets[i].first_pair, gb.mass_targets[i].slots, begin,
                                       static_cast<uint32_t>(token_list.size())});
  }
  upload(gb.mass_sequences, sequences);
  upload(gb.mass_tokens, token_list);
  ensure(gb.mass, size_t{pairs} * sizeof(uint64_t), GpuMemory::kHostVisible);
}

void GpuDecoderRunner::add_slot_mass(const GroupBuffers& gb) const {
  if (gb.mass_targets.empty()) return;
  const std::byte* bytes = gb.mass->mapped().data();
  for (const MassTarget& target : gb.mass_targets) {
    for (size_t layer = 0; layer < target.layers; ++layer) {
      for (size_t g = 0; g < target.heads; ++g) {
        uint64_t* row = target.mass.row(layer, g);
        const size_t first = target.first_pair + (layer * target.heads + g) * target.slots;
        for (size_t s = 0; s < target.slots; ++s) {
          uint32_t pair[2];  // (lo, hi)
          std::memcpy(pair, bytes + (first + s) * sizeof(pair), sizeof(pair));
          row[s] += uint64_t{pair[0]} | uint64_t{pair[1]} << 32;
        }
      }
    }
  }
}

void GpuDecoderRunner::sum_over_ranks(GpuBuffer& y, size_t n) {
  if (!tp_) return;
  // The step so far runs, y [n][dim] comes back, is summed over the ranks (through host memory, as the CPU's
  // collectives), goes up again, and the step goes on in a new submission.
  check(ops_->end_step(), "running the step");
  const size_t count = n * model_.shard_config().dim;
  partial_.resize(count);
  check(y.download(std::as_writable_bytes(std::span(partial_))), "copying a partial sum back");
  timed([&] { tp_->all_reduce_sum(std::span(partial_)); });
  check(y.upload(std::as_bytes(std::span(partial_))), "copying the sum up");
  check(ops_->begin_step(), "starting a step");
}

void GpuDecoderRunner::timed(const std::function<void()>& collective) {
  const auto start = std::chrono::steady_clock::now();
  collective();
  communication_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++num_collectives_;
}

GpuDecoderRunner::RopeBuffers& GpuDecoderRunner::upload_rope(RopeBuffers& to, std::span<const float> inv_freq,
                                                             std::span<const uint32_t> positions) {
  const size_t n = positions.size(), half = inv_freq.size();
  std::vector<float> cos(n * half), sin(n * half);
  for (size_t t = 0; t < n; ++t) rope_cos_sin(positions[t], inv_freq, {&cos[t * half], half}, {&sin[t * half], half});
  upload(to.cos, cos);
  upload(to.sin, sin);
  return to;
}

void GpuDecoderRunner::add_to_residual(GpuBuffer& x, GpuBuffer& y, GpuBuffer* norm, GpuBuffer& scratch,
                                       uint32_t tokens) {
  const ModelConfig& c = model_.shard_config();
  const uint32_t dim = static_cast<uint32_t>(c.dim);
  if (norm) check(ops_->rmsnorm(y, *norm, scratch, tokens, dim, c.rms_eps), "in a post-norm");
  check(ops_->add(x, norm ? scratch : y, tokens * dim), "adding to the residual");
}

}  // namespace kvs
