#include "model/decoder_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "core/thread_pool.h"
#include "tensor/convert.h"

namespace kvs {
namespace {

Status shape_error(const gguf::File& file, const gguf::TensorInfo& t, const std::string& expected) {
  std::string dims;
  for (size_t i = 0; i < t.dims.size(); ++i) dims += (i ? ", " : "") + std::to_string(t.dims[i]);
  return Status::corrupt(fmt::format("{}: tensor '{}' has shape [{}], expected {} from the model config", file.path(),
                                     t.name, dims, expected));
}

Expected<const gguf::TensorInfo*> find(const gguf::File& file, const std::string& name) {
  const auto* t = file.find_tensor(name);
  if (!t) return Status::corrupt(fmt::format("{}: tensor '{}' is missing", file.path(), name));
  return t;
}

// A block-quantized tensor whose blocks' scales are not all finite is corrupt: every value of such a block would be
// inf or NaN. `row_blocks`: blocks per row, to name the row.
Status check_block_scales(const gguf::File& file, const gguf::TensorInfo& t, size_t row_blocks) {
  const auto bad = find_non_finite_block_scale(t.type, t.data);
  if (!bad) return Status::ok();
  return Status::corrupt(fmt::format("{}: tensor '{}' ({}): block {} of row {} has a non-finite {} (fp16 bits {:#06x})",
                                     file.path(), t.name, dtype_name(t.type), bad->block % row_blocks,
                                     bad->block / row_blocks, bad->field, bad->bits));
}

// A matrix [rows][cols]: GGUF dims {cols, rows}.
Expected<WeightView> matrix(const gguf::File& file, const std::string& name, size_t rows, size_t cols) {
  auto t = find(file, name);
  if (!t) return t.status();
  const gguf::TensorInfo& info = **t;
  if (info.dims.size() != 2 || info.dims[0] != cols || info.dims[1] != rows) {
    return shape_error(file, info, fmt::format("[{}, {}]", cols, rows));
  }
  if (cols % dtype_block_elements(info.type) != 0) {
    return Status::corrupt(fmt::format("{}: tensor '{}' has rows of {} values, not a multiple of the {} block of {}",
                                       file.path(), name, cols, dtype_name(info.type),
                                       dtype_block_elements(info.type)));
  }
  if (Status s = check_block_scales(file, info, cols / dtype_block_elements(info.type)); !s) return s;
  return WeightView{.type = info.type, .data = info.data.data(), .rows = rows, .cols = cols};
}

Expected<std::vector<float>> vector(const gguf::File& file, const std::string& name, size_t n) {
  auto t = find(file, name);
  if (!t) return t.status();
  const gguf::TensorInfo& info = **t;
  if (info.dims.size() != 1 || info.dims[0] != n) return shape_error(file, info, fmt::format("[{}]", n));
  if (n % dtype_block_elements(info.type) != 0) {
    return Status::corrupt(
        fmt::format("{}: tensor '{}' of {} elements cannot be {}", file.path(), name, n, dtype_name(info.type)));
  }
  if (Status s = check_block_scales(file, info, n / dtype_block_elements(info.type)); !s) return s;
  std::vector<float> out(n);
  dequantize_row(info.type, info.data.data(), out.data(), n);
  return out;
}

// Replaces a packed-kernel type (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) view by a copy packed for this CPU's kernels, owned by
// `storage`. When nothing else reads the file's bytes of the matrix (`release_source`), their pages leave the process:
// resident memory holds one copy, not two.
void pack(WeightView& view, std::vector<PackedMatrix>& storage, const gguf::File& file, bool release_source,
          ThreadPool& pool) {
  const std::optional<WeightLayout> layout = packed_layout_for(view.type);
  if (!layout) return;
  storage.push_back(PackedMatrix::pack(view, *layout, &pool));
  if (release_source) file.release({view.data, view.bytes()});
  view = storage.back().view();
}

}  // namespace

Expected<DecoderWeights> DecoderWeights::from_gguf(const gguf::File& file, const ModelConfig& c,
                                                   WeightPacking packing) {
  DecoderWeights w;
#define KVS_TRY_ASSIGN(lhs, expr) \
  do {                            \
    auto r_ = (expr);             \
    if (!r_) return r_.status();  \
    lhs = std::move(*r_);         \
  } while (0)
  KVS_TRY_ASSIGN(w.token_embedding, matrix(file, "token_embd.weight", c.vocab_size, c.dim));
  w.layers.resize(c.num_layers);
  for (size_t l = 0; l < c.num_layers; ++l) {
    DecoderLayerWeights& lw = w.layers[l];
    const std::string p = fmt::format("blk.{}.", l);
    KVS_TRY_ASSIGN(lw.attn_norm, vector(file, p + "attn_norm.weight", c.dim));
    KVS_TRY_ASSIGN(lw.wq, matrix(file, p + "attn_q.weight", c.q_dim(), c.dim));
    KVS_TRY_ASSIGN(lw.wk, matrix(file, p + "attn_k.weight", c.kv_dim(), c.dim));
    KVS_TRY_ASSIGN(lw.wv, matrix(file, p + "attn_v.weight", c.kv_dim(), c.dim));
    KVS_TRY_ASSIGN(lw.wo, matrix(file, p + "attn_output.weight", c.dim, c.q_dim()));
    if (c.qkv_bias) {
      KVS_TRY_ASSIGN(lw.bq, vector(file, p + "attn_q.bias", c.q_dim()));
      KVS_TRY_ASSIGN(lw.bk, vector(file, p + "attn_k.bias", c.kv_dim()));
      KVS_TRY_ASSIGN(lw.bv, vector(file, p + "attn_v.bias", c.kv_dim()));
    }
    KVS_TRY_ASSIGN(lw.ffn_norm, vector(file, p + "ffn_norm.weight", c.dim));
    KVS_TRY_ASSIGN(lw.w_gate, matrix(file, p + "ffn_gate.weight", c.ffn_dim, c.dim));
    KVS_TRY_ASSIGN(lw.w_up, matrix(file, p + "ffn_up.weight", c.ffn_dim, c.dim));
    KVS_TRY_ASSIGN(lw.w_down, matrix(file, p + "ffn_down.weight", c.dim, c.ffn_dim));
    if (c.is_gemma3()) {
      KVS_TRY_ASSIGN(lw.q_norm, vector(file, p + "attn_q_norm.weight", c.head_dim));
      KVS_TRY_ASSIGN(lw.k_norm, vector(file, p + "attn_k_norm.weight", c.head_dim));
      KVS_TRY_ASSIGN(lw.post_attention_norm, vector(file, p + "post_attention_norm.weight", c.dim));
      KVS_TRY_ASSIGN(lw.post_ffw_norm, vector(file, p + "post_ffw_norm.weight", c.dim));
    }
  }
  KVS_TRY_ASSIGN(w.output_norm, vector(file, "output_norm.weight", c.dim));
  if (c.tied_output) {
    w.output = w.token_embedding;
  } else {
    KVS_TRY_ASSIGN(w.output, matrix(file, "output.weight", c.vocab_size, c.dim));
  }
#undef KVS_TRY_ASSIGN
  if (packing == WeightPacking::kForCpu) {
    // The embedding stays row-major (rows are looked up one token at a time); a tied output gets a copy.
    // The views point into each PackedMatrix's heap buffer, which stays put when the vector grows. Loading packs
    // on every hardware thread (a 1B Q4_K model: 3.0 s on two instead of 4.3 s on one).
    ThreadPool pool(std::max(1u, std::thread::hardware_concurrency()));
    for (DecoderLayerWeights& lw : w.layers) {
      for (WeightView* m : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) {
        pack(*m, w.packed, file, true, pool);
      }
    }
    pack(w.output, w.packed, file, !c.tied_output, pool);  // tied: the embedding's rows are still looked up
  }
  return w;
}

size_t DecoderWeights::matrix_bytes() const {
  size_t total = output.bytes();
  for (const auto& l : layers) {
    for (const WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) total += m->bytes();
  }
  return total;
}

}  // namespace kvs
