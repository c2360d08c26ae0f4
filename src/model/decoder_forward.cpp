#include "model/decoder_forward.h"

#include <chrono>
#include <cmath>

#include "model/projection.h"
#include "tensor/convert.h"
#include "tensor/ops.h"

namespace kvs {

DecoderForward::DecoderForward(const ModelConfig& config, const DecoderWeights& weights, ThreadPool& pool,
                               Communicator* tp)
    : config_(config),
      weights_(weights),
      pool_(pool),
      tp_(tp != nullptr && tp->size() > 1 ? tp : nullptr),
      attention_(pool,
                 {.num_heads = config.num_heads, .num_kv_heads = config.num_kv_heads, .head_dim = config.head_dim}) {}

size_t DecoderForward::begin(const ForwardBatch& batch, std::span<const KvStorage> kv, std::span<const float> logits) {
  const ModelConfig& c = config_;
  const size_t n = batch.tokens.size();
  KVS_ASSERT(batch.layers && batch.layers->num_layers() == c.num_layers &&
                 batch.layers->groups.size() == batch.kv.size() && kv.size() == batch.kv.size(),
             "{} KV storages and {} group batches for a layout of {} groups", kv.size(), batch.kv.size(),
             batch.layers ? batch.layers->groups.size() : 0);
  KVS_ASSERT(batch.positions.size() == n, "batch arrays disagree: {} tokens, {} positions", n, batch.positions.size());
  KVS_ASSERT(!is_root() || logits.size() >= batch.logits_for.size() * c.vocab_size, "logits buffer {} < {} x {}",
             logits.size(), batch.logits_for.size(), c.vocab_size);  // only rank 0 gets logits
  write_runs_.resize(kv.size());
  for (size_t g = 0; g < kv.size(); ++g) {
    const KvGroupBatch& group = batch.kv[g];
    KVS_ASSERT(group.attention.sequence_of_token.size() == n && group.kv_slots.size() == n,
               "group {}: {} tokens, {} sequence ids, {} slots", g, n, group.attention.sequence_of_token.size(),
               group.kv_slots.size());
    const KvCacheSpec& kv_spec = kv[g].spec();
    KVS_ASSERT(
        kv_spec.num_layers == batch.layers->groups[g].layers.size() && kv_matches(kv_spec),
        "KV storage {} shape (layers {}, kv heads {}, head dims {}/{}, MLA {}: latent {} + rope {}) does not match "
        "the model",
        g, kv_spec.num_layers, kv_spec.num_kv_heads, kv_spec.head_dim, kv_spec.value_width(), kv_spec.mla,
        kv_spec.kv_lora_rank, kv_spec.rope_dim);
    write_runs_[g] = kv_write_runs(group.kv_slots, kv[g].block_size());
  }
  if (x_.size() < n * c.dim) {
    x_.resize(n * c.dim);
    xb_.resize(n * c.dim);
    q_.resize(n * c.q_dim());
    k_.resize(n * c.kv_dim());
    v_.resize(n * c.kv_dim());
    att_.resize(n * c.q_dim());
    proj_.resize(n * c.dim);
    gate_.resize(n * c.ffn_dim);
    up_.resize(n * c.ffn_dim);
  }
  // x[t] = embedding row of token t (times the embedding scale).
  for (size_t t = 0; t < n; ++t) {
    const TokenId id = batch.tokens[t];
    KVS_ASSERT(id >= 0 && static_cast<size_t>(id) < c.vocab_size, "token id {} outside vocabulary of {}", id,
               c.vocab_size);
    float* row = &x_[t * c.dim];
    dequantize_row(weights_.token_embedding.type, weights_.token_embedding.row(id), row, c.dim);
    if (c.embedding_scale != 1.0f)
      for (size_t i = 0; i < c.dim; ++i) row[i] *= c.embedding_scale;
  }
  return n;
}

void DecoderForward::project(std::span<const float> x, size_t n,
                             std::initializer_list<std::pair<const WeightView*, float*>> outs) {
  kvs::project(x, n, outs, pool_, xq_, scratch_);
}

bool DecoderForward::kv_matches(const KvCacheSpec& spec) const {
  return !spec.mla && spec.num_kv_heads == config_.num_kv_heads && spec.head_dim == config_.head_dim &&
         spec.value_width() == config_.head_dim;
}

void DecoderForward::store_kv(const ForwardBatch& batch, std::span<KvStorage> kv, size_t layer) {
  store_rows(batch, kv, layer, k_, v_, config_.kv_dim());
}

void DecoderForward::store_rows(const ForwardBatch& batch, std::span<KvStorage> kv, size_t layer,
                                std::span<const float> k, std::span<const float> v, size_t width) {
  // Split by block runs (the write path's unit). The stores mostly miss the cache (a new slot's lines were
  // never read), so on one thread they took several percent of a batched decode step.
  const size_t kv_dim = width;
  const size_t g = batch.layers->group_of[layer], at_layer = batch.layers->index_in_group[layer];
  const KvGroupBatch& group = batch.kv[g];
  KvStorage& storage = kv[g];
  const std::vector<KvWriteRun>& runs = write_runs_[g];
  pool_.parallel_for(runs.size(), 1, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const KvWriteRun run = runs[r];
      const size_t floats = run.count * kv_dim, at = run.first * kv_dim;
      const KvSlot first = group.kv_slots[run.first];
      const std::span<const uint32_t> tails = group.attention.key_tails;
      const uint32_t tail = tails.empty() ? kNoKeyTail : tails[first.value / storage.block_size()];
      write_kv_run(storage, at_layer, first, run.count, k.subspan(at, floats), v.empty() ? v : v.subspan(at, floats),
                   tail);
    }
  });
}

void DecoderForward::attend(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer) {
  const size_t g = batch.layers->group_of[layer];
  attention_.run(kv[g], batch.layers->index_in_group[layer], batch.kv[g].attention, q_, att_,
                 batch.layers->attention_window[layer]);
}

void DecoderForward::rope_tables(std::span<const uint32_t> positions, Rope& rope) const {
  const size_t half = rope.inv_freq.size(), n = positions.size();
  rope.cos.resize(n * half);
  rope.sin.resize(n * half);
  for (size_t t = 0; t < n; ++t) {
    rope_cos_sin(positions[t], rope.inv_freq, {&rope.cos[t * half], half}, {&rope.sin[t * half], half});
  }
}

void DecoderForward::rotate(std::span<float> heads, size_t n_heads, const Rope& rope, size_t t) const {
  const size_t half = rope.inv_freq.size();
  const std::span<const float> cos{&rope.cos[t * half], half}, sin{&rope.sin[t * half], half};
  if (config_.rope_style == RopeStyle::kNeox) {
    rope_neox(heads, n_heads, config_.head_dim, cos, sin);
  } else {
    rope_interleaved(heads, n_heads, config_.head_dim, cos, sin);
  }
}

void DecoderForward::add_to_residual(std::span<const float> y, size_t n) {
  for (size_t i = 0; i < n * config_.dim; ++i) x_[i] += y[i];
}

template <typename Collective>
void DecoderForward::timed(Collective collective) {
  const auto start = std::chrono::steady_clock::now();
  collective();
  communication_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++num_collectives_;
}

void DecoderForward::sum_over_ranks(std::span<float> y, size_t n) {
  if (tp_) timed([&] { tp_->all_reduce_sum(y.first(n * config_.dim)); });
}

void DecoderForward::rmsnorm_rows(std::span<float> out, std::span<const float> in, std::span<const float> weight,
                                  size_t n) const {
  const size_t d = config_.dim;
  for (size_t t = 0; t < n; ++t) rmsnorm(out.subspan(t * d, d), in.subspan(t * d, d), weight, config_.rms_eps);
}

void DecoderForward::compute_logits(const ForwardBatch& batch, std::span<float> logits) {
  const ModelConfig& c = config_;
  const size_t m = batch.logits_for.size(), n = batch.tokens.size();
  if (m == 0) return;
  final_.resize(m * c.dim);
  for (size_t i = 0; i < m; ++i) {
    const size_t t = batch.logits_for[i];
    KVS_ASSERT(t < n, "logits requested for token {} of a batch of {}", t, n);
    rmsnorm({&final_[i * c.dim], c.dim}, {&x_[t * c.dim], c.dim}, weights_.output_norm, c.rms_eps);
  }
  if (tp_) {
    // This rank's vocabulary slice (rows [V r / N, V (r + 1) / N) of the output matrix), gathered to rank 0 and
    // put in place: rank after rank, each [m][its slice].
    const size_t vocab = weights_.output.rows, ranks = tp_->size(), v = c.vocab_size;
    local_logits_.resize(m * vocab);
    matmul(weights_.output, final_, m, local_logits_, pool_, scratch_);
    if (is_root()) gathered_logits_.resize(m * v);
    timed([&] { tp_->gather(local_logits_, is_root() ? std::span<float>(gathered_logits_) : std::span<float>(), 0); });
    if (!is_root()) return;
    for (size_t r = 0, at = 0; r < ranks; ++r) {
      const size_t first = v * r / ranks, width = v * (r + 1) / ranks - first;
      for (size_t i = 0; i < m; ++i, at += width) std::copy_n(&gathered_logits_[at], width, &logits[i * v + first]);
    }
  } else {
    matmul(weights_.output, final_, m, logits, pool_, scratch_);
  }
  if (const float cap = c.final_logit_softcap; cap > 0.0f) {
    for (float& l : logits.first(m * c.vocab_size)) l = cap * std::tanh(l / cap);
  }
}

}  // namespace kvs
