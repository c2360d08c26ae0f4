#include "model/deepseek2_weights.h"

#include <fmt/format.h>

#include "model/weight_loading.h"
#include "tensor/convert.h"

namespace kvs {
namespace {

std::vector<float> dequantized(const WeightView& w) {
  std::vector<float> out(w.rows * w.cols);
  for (size_t r = 0; r < w.rows; ++r) dequantize_row(w.type, w.row(r), &out[r * w.cols], w.cols);
  return out;
}

// values [rows][cols] stored as `built` in the type a built matrix of `source` gets: the source's float type, or Q8_0
// for a quantized source (F32 when the rows are not whole Q8_0 blocks).
WeightView store_built(const std::vector<float>& values, size_t rows, size_t cols, DType source,
                       std::vector<std::byte>& built) {
  DType type = source;
  if (source != DType::kF32 && source != DType::kF16 && source != DType::kBF16) {
    type = cols % dtype_block_elements(DType::kQ8_0) == 0 ? DType::kQ8_0 : DType::kF32;
  }
  const size_t row_bytes = dtype_row_bytes(type, cols);
  built.resize(rows * row_bytes);
  for (size_t r = 0; r < rows; ++r) quantize_row(type, &values[r * cols], built.data() + r * row_bytes, cols);
  return {.type = type, .data = built.data(), .rows = rows, .cols = cols};
}

// The two forms of the K/V up-projection of H heads over a latent of r: kv_b [H][nope + value][r] (expansion) and
// the absorbed pair k_b [H][r][nope] (W_kb transposed), v_b [H][value][r]. One is the file's; the other is built.
void complete_kv_b(const ModelConfig& c, MlaLayerWeights& m) {
  const size_t heads = c.num_heads, r = c.mla.kv_lora_rank, nope = c.mla.nope_dim, value = c.mla.value_dim;
  const size_t per_head = nope + value;
  if (m.kv_b.data) {  // k_b transposed from kv_b's key rows; v_b is kv_b's value rows, read in place
    const std::vector<float> kv = dequantized(m.kv_b);
    std::vector<float> k_b(heads * r * nope);
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < nope; ++i)
        for (size_t j = 0; j < r; ++j) k_b[(h * r + j) * nope + i] = kv[(h * per_head + i) * r + j];
    m.k_b = store_built(k_b, heads * r, nope, m.kv_b.type, m.built);
    m.v_b = m.kv_b;
    m.v_b_first = nope;
    m.v_b_stride = per_head;
    return;
  }
  const std::vector<float> k = dequantized(m.k_b), v = dequantized(m.v_b);  // kv_b from k_b and v_b
  std::vector<float> kv(heads * per_head * r);
  for (size_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < nope; ++i)
      for (size_t j = 0; j < r; ++j) kv[(h * per_head + i) * r + j] = k[(h * r + j) * nope + i];
    for (size_t i = 0; i < value; ++i)
      for (size_t j = 0; j < r; ++j) kv[(h * per_head + nope + i) * r + j] = v[(h * value + i) * r + j];
  }
  m.kv_b = store_built(kv, heads * per_head, r, m.k_b.type, m.built);
  m.v_b_first = 0;
  m.v_b_stride = value;
}

}  // namespace

Status load_deepseek2_layer(const gguf::File& file, const ModelConfig& c, size_t l, DecoderLayerWeights& lw) {
  const std::string p = fmt::format("blk.{}.", l);
  const MlaConfig& mla = c.mla;
  const size_t heads = c.num_heads, r = mla.kv_lora_rank;
  MlaLayerWeights& m = lw.mla;
  KVS_TRY_ASSIGN(lw.attn_norm, load_vector(file, p + "attn_norm.weight", c.dim));
  if (mla.q_lora_rank > 0) {
    KVS_TRY_ASSIGN(m.q_a, load_matrix(file, p + "attn_q_a.weight", mla.q_lora_rank, c.dim));
    KVS_TRY_ASSIGN(m.q_a_norm, load_vector(file, p + "attn_q_a_norm.weight", mla.q_lora_rank));
    KVS_TRY_ASSIGN(m.q_b, load_matrix(file, p + "attn_q_b.weight", c.q_dim(), mla.q_lora_rank));
  } else {
    KVS_TRY_ASSIGN(lw.wq, load_matrix(file, p + "attn_q.weight", c.q_dim(), c.dim));
  }
  KVS_TRY_ASSIGN(m.kv_a, load_matrix(file, p + "attn_kv_a_mqa.weight", r + c.rope_dim, c.dim));
  KVS_TRY_ASSIGN(m.kv_a_norm, load_vector(file, p + "attn_kv_a_norm.weight", r));
  if (mla.split_kv_b) {
    // attn_k_b: GGUF {nope, r, H} (per head r rows of nope); attn_v_b: {r, value, H} (per head value rows of r).
    std::vector<WeightView> k_b, v_b;
    KVS_TRY_ASSIGN(k_b, load_matrices(file, p + "attn_k_b.weight", heads, r, mla.nope_dim));
    KVS_TRY_ASSIGN(v_b, load_matrices(file, p + "attn_v_b.weight", heads, mla.value_dim, r));
    m.k_b = {.type = k_b[0].type, .data = k_b[0].data, .rows = heads * r, .cols = mla.nope_dim};
    m.v_b = {.type = v_b[0].type, .data = v_b[0].data, .rows = heads * mla.value_dim, .cols = r};
  } else {
    KVS_TRY_ASSIGN(m.kv_b, load_matrix(file, p + "attn_kv_b.weight", heads * (mla.nope_dim + mla.value_dim), r));
  }
  complete_kv_b(c, m);
  KVS_TRY_ASSIGN(lw.wo, load_matrix(file, p + "attn_output.weight", c.dim, heads * mla.value_dim));
  KVS_TRY_ASSIGN(lw.ffn_norm, load_vector(file, p + "ffn_norm.weight", c.dim));
  if (!c.moe.is_moe_layer(l)) {
    KVS_TRY_ASSIGN(lw.w_gate, load_matrix(file, p + "ffn_gate.weight", c.ffn_dim, c.dim));
    KVS_TRY_ASSIGN(lw.w_up, load_matrix(file, p + "ffn_up.weight", c.ffn_dim, c.dim));
    KVS_TRY_ASSIGN(lw.w_down, load_matrix(file, p + "ffn_down.weight", c.dim, c.ffn_dim));
    return Status::ok();
  }
  const MoeConfig& e = c.moe;
  MoeLayerWeights& moe = lw.moe;
  KVS_TRY_ASSIGN(moe.router, load_matrix(file, p + "ffn_gate_inp.weight", e.num_experts, c.dim));
  KVS_TRY_ASSIGN(moe.gate, load_matrices(file, p + "ffn_gate_exps.weight", e.num_experts, e.expert_ffn_dim, c.dim));
  KVS_TRY_ASSIGN(moe.up, load_matrices(file, p + "ffn_up_exps.weight", e.num_experts, e.expert_ffn_dim, c.dim));
  KVS_TRY_ASSIGN(moe.down, load_matrices(file, p + "ffn_down_exps.weight", e.num_experts, c.dim, e.expert_ffn_dim));
  if (e.shared_experts > 0) {
    const size_t width = e.shared_experts * e.expert_ffn_dim;
    KVS_TRY_ASSIGN(moe.shared_gate, load_matrix(file, p + "ffn_gate_shexp.weight", width, c.dim));
    KVS_TRY_ASSIGN(moe.shared_up, load_matrix(file, p + "ffn_up_shexp.weight", width, c.dim));
    KVS_TRY_ASSIGN(moe.shared_down, load_matrix(file, p + "ffn_down_shexp.weight", c.dim, width));
  }
  return Status::ok();
}

}  // namespace kvs
