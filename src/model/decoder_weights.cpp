#include "model/decoder_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "core/thread_pool.h"
#include "model/deepseek2_weights.h"
#include "model/weight_loading.h"

namespace kvs {

std::vector<WeightView*> packable_matrices(DecoderLayerWeights& l) {
  std::vector<WeightView*> out = {&l.wq,
                                  &l.wk,
                                  &l.wv,
                                  &l.wo,
                                  &l.w_gate,
                                  &l.w_up,
                                  &l.w_down,
                                  &l.mla.q_a,
                                  &l.mla.q_b,
                                  &l.mla.kv_a,
                                  &l.moe.shared_gate,
                                  &l.moe.shared_up,
                                  &l.moe.shared_down};
  for (auto* set : {&l.moe.gate, &l.moe.up, &l.moe.down}) {
    for (WeightView& m : *set) out.push_back(&m);
  }
  return out;
}

namespace {

// The absorbed form's per-head matrices, each packed on its own (the absorbed decode multiplies head by head): k_b's
// [r][nope] and v_b's [value][r]. The sources stay: the expanded form reads kv_b whole (v_b's rows are kv_b's),
// and a k_b built at load stays beside its packed heads (about 1 MB a layer for DeepSeek-V2-Lite).
void pack_mla_heads(MlaLayerWeights& m, const ModelConfig& c, std::vector<PackedMatrix>& storage,
                    const gguf::File& file, ThreadPool& pool) {
  const size_t heads = c.num_heads;
  std::vector<WeightView> k_b(heads), v_b(heads);
  for (size_t h = 0; h < heads; ++h) {
    k_b[h] = m.k_b_head(h, c.mla.kv_lora_rank);
    v_b[h] = m.v_b_head(h, c.mla.value_dim);
    pack_for_cpu(k_b[h], storage, file, false, pool);
    pack_for_cpu(v_b[h], storage, file, false, pool);
  }
  m.k_b_packed = std::move(k_b);
  m.v_b_packed = std::move(v_b);
}

// Keeps only a tensor-parallel rank's part of a Llama-family layer (model/tensor_shard.h).
Status shard_layer(DecoderLayerWeights& lw, const ModelConfig& c, const ShardRanges& g, size_t layer,
                   std::vector<std::vector<std::byte>>& sliced) {
  const size_t hd = c.head_dim;
  const auto part = [](std::vector<float>& v, size_t first, size_t count) {
    if (!v.empty())
      v = std::vector<float>(v.begin() + static_cast<ptrdiff_t>(first),
                             v.begin() + static_cast<ptrdiff_t>(first + count));
  };
  lw.wq = slice_rows(lw.wq, g.q_first * hd, g.q_heads * hd);
  lw.wk = slice_rows(lw.wk, g.kv_first * hd, g.kv_heads * hd);
  lw.wv = slice_rows(lw.wv, g.kv_first * hd, g.kv_heads * hd);
  part(lw.bq, g.q_first * hd, g.q_heads * hd);
  part(lw.bk, g.kv_first * hd, g.kv_heads * hd);
  part(lw.bv, g.kv_first * hd, g.kv_heads * hd);
  const std::string p = fmt::format("blk.{}.", layer);
  KVS_TRY_ASSIGN(lw.wo,
                 slice_columns(lw.wo, p + "attn_output.weight", g.q_first * hd, g.q_heads * hd, sliced.emplace_back()));
  lw.w_gate = slice_rows(lw.w_gate, g.ffn_first, g.ffn);
  lw.w_up = slice_rows(lw.w_up, g.ffn_first, g.ffn);
  KVS_TRY_ASSIGN(lw.w_down, slice_columns(lw.w_down, p + "ffn_down.weight", g.ffn_first, g.ffn, sliced.emplace_back()));
  return Status::ok();
}

}  // namespace

Expected<DecoderWeights> DecoderWeights::from_gguf(const gguf::File& file, const ModelConfig& c, WeightPacking packing,
                                                   const ShardRanges* shard) {
  DecoderWeights w;
  w.experts_used = c.moe.experts_used;
  KVS_TRY_ASSIGN(w.token_embedding, load_matrix(file, "token_embd.weight", c.vocab_size, c.dim));
  w.layers.resize(c.num_layers);
  for (size_t l = 0; l < c.num_layers; ++l) {
    DecoderLayerWeights& lw = w.layers[l];
    if (c.is_mla()) {
      KVS_RETURN_IF_ERROR(load_deepseek2_layer(file, c, l, lw));
      continue;
    }
    const std::string p = fmt::format("blk.{}.", l);
    KVS_TRY_ASSIGN(lw.attn_norm, load_vector(file, p + "attn_norm.weight", c.dim));
    KVS_TRY_ASSIGN(lw.wq, load_matrix(file, p + "attn_q.weight", c.q_dim(), c.dim));
    KVS_TRY_ASSIGN(lw.wk, load_matrix(file, p + "attn_k.weight", c.kv_dim(), c.dim));
    KVS_TRY_ASSIGN(lw.wv, load_matrix(file, p + "attn_v.weight", c.kv_dim(), c.dim));
    KVS_TRY_ASSIGN(lw.wo, load_matrix(file, p + "attn_output.weight", c.dim, c.q_dim()));
    if (c.qkv_bias) {
      KVS_TRY_ASSIGN(lw.bq, load_vector(file, p + "attn_q.bias", c.q_dim()));
      KVS_TRY_ASSIGN(lw.bk, load_vector(file, p + "attn_k.bias", c.kv_dim()));
      KVS_TRY_ASSIGN(lw.bv, load_vector(file, p + "attn_v.bias", c.kv_dim()));
    }
    KVS_TRY_ASSIGN(lw.ffn_norm, load_vector(file, p + "ffn_norm.weight", c.dim));
    KVS_TRY_ASSIGN(lw.w_gate, load_matrix(file, p + "ffn_gate.weight", c.ffn_dim, c.dim));
    KVS_TRY_ASSIGN(lw.w_up, load_matrix(file, p + "ffn_up.weight", c.ffn_dim, c.dim));
    KVS_TRY_ASSIGN(lw.w_down, load_matrix(file, p + "ffn_down.weight", c.dim, c.ffn_dim));
    if (c.is_gemma3()) {
      KVS_TRY_ASSIGN(lw.q_norm, load_vector(file, p + "attn_q_norm.weight", c.head_dim));
      KVS_TRY_ASSIGN(lw.k_norm, load_vector(file, p + "attn_k_norm.weight", c.head_dim));
      KVS_TRY_ASSIGN(lw.post_attention_norm, load_vector(file, p + "post_attention_norm.weight", c.dim));
      KVS_TRY_ASSIGN(lw.post_ffw_norm, load_vector(file, p + "post_ffw_norm.weight", c.dim));
    }
    if (shard) KVS_RETURN_IF_ERROR(shard_layer(lw, c, *shard, l, w.sliced));
  }
  KVS_TRY_ASSIGN(w.output_norm, load_vector(file, "output_norm.weight", c.dim));
  if (c.tied_output) {
    w.output = w.token_embedding;
  } else {
    KVS_TRY_ASSIGN(w.output, load_matrix(file, "output.weight", c.vocab_size, c.dim));
  }
  if (shard) w.output = slice_rows(w.output, shard->vocab_first, shard->vocab);  // the embedding stays whole
  if (packing == WeightPacking::kForCpu) {
    // The embedding stays row-major (rows are looked up one token at a time); a tied output gets a copy.
    // The views point into each PackedMatrix's heap buffer, which stays put when the vector grows. Loading packs
    // on every hardware thread (a 1B Q4_K model: 3.0 s on two instead of 4.3 s on one).
    ThreadPool pool(std::max(1u, std::thread::hardware_concurrency()));
    for (DecoderLayerWeights& lw : w.layers) {
      for (WeightView* m : packable_matrices(lw)) pack_for_cpu(*m, w.packed, file, true, pool);
      if (lw.mla.k_b.data) pack_mla_heads(lw.mla, c, w.packed, file, pool);
    }
    pack_for_cpu(w.output, w.packed, file, !c.tied_output, pool);  // tied: the embedding's rows are still looked up
    // Column slices now packed: the unpacked copies no view points into go (moving a buffer keeps its bytes).
    std::erase_if(w.sliced, [&](const std::vector<std::byte>& buffer) {
      return std::ranges::none_of(w.layers, [&](const DecoderLayerWeights& lw) {
        return lw.wo.data == buffer.data() || lw.w_down.data == buffer.data();
      });
    });
  }
  return w;
}

size_t DecoderWeights::matrix_bytes() const {
  size_t total = output.bytes();
  for (const auto& l : layers) {
    for (const WeightView* m :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.mla.q_a, &l.mla.q_b, &l.mla.kv_a, &l.mla.k_b,
          &l.mla.v_b, &l.moe.router, &l.moe.shared_gate, &l.moe.shared_up, &l.moe.shared_down}) {
      total += m->bytes();
    }
    if (l.moe.gate.empty()) continue;
    size_t experts = 0;  // all routed experts' bytes; a token reads experts_used of them
    for (const auto* set : {&l.moe.gate, &l.moe.up, &l.moe.down}) {
      for (const WeightView& m : *set) experts += m.bytes();
    }
    total += experts * experts_used / l.moe.gate.size();
  }
  return total;
}

}  // namespace kvs
