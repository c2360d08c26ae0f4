// Views of a decoder's weights inside the mapped GGUF file, checked against the config: the Llama block's,
// Qwen2's Q/K/V biases, Gemma 3's q/k norms and post-norms, DeepSeek-V2's latent attention and experts.
// 1-D norm weights are converted to owned fp32 vectors; matrices stay in the file's dtype. Q8_0, Q4_0,
// Q4_K, Q5_K and Q6_K matrices are repacked into owned memory for the int8 dot-product kernels (WeightPacking::kForCpu:
// groups of 16 rows with AVX-512 VNNI, of 8 with AVX2): the same values, in a layout the kernels read without unpacking
// or horizontal sums (tensor/packed_weights.h).
#pragma once

#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"
#include "model/model_config.h"
#include "model/tensor_shard.h"
#include "tensor/packed_weights.h"
#include "tensor/weight_view.h"

namespace kvs {

// DeepSeek-V2's latent attention (model_config.h MlaConfig for the shapes; H heads, r = kv_lora_rank).
struct MlaLayerWeights {
  WeightView q_a;                // [q_lora_rank][dim] when q_lora_rank > 0 (else the layer's wq: [H x head_dim][dim])
  std::vector<float> q_a_norm;   // [q_lora_rank]
  WeightView q_b;                // [H x head_dim][q_lora_rank]
  WeightView kv_a;               // [r + rope_dim][dim]: the latent before its norm, then the key's RoPE part
  std::vector<float> kv_a_norm;  // [r]
  WeightView kv_b;               // [H x (nope + value)][r]: per head its key rows then its value rows (expansion)
  WeightView k_b;                // [H x r][nope]: per head W_kb^T, which absorbs the key up-projection into queries
  // Per head W_vb [value][r], applied to the attention output over latents: rows v_b_first + h x v_b_stride on of
  // v_b (the file's attn_v_b, or the value rows of attn_kv_b in place).
  WeightView v_b;
  size_t v_b_first = 0, v_b_stride = 0;
  // What the file lacks, built at load (k_b from attn_kv_b, or attn_kv_b from the split pair): in the source's type
  // when it is a float type, else Q8_0 (requantized after the transpose, as ik_llama.cpp prepares wk_b).
  std::vector<std::byte> built;
  // Per head, k_b_head's and v_b_head's matrices packed for this CPU's kernels (DecoderWeights' packed storage), when
  // the weights are packed and their type packs; else empty, and the heads are read in the views above.
  std::vector<WeightView> k_b_packed, v_b_packed;

  WeightView k_b_head(size_t h, size_t r) const {
    if (!k_b_packed.empty()) return k_b_packed[h];
    return {.type = k_b.type, .data = k_b.row(h * r), .rows = r, .cols = k_b.cols};
  }
  WeightView v_b_head(size_t h, size_t value) const {
    if (!v_b_packed.empty()) return v_b_packed[h];
    return {.type = v_b.type, .data = v_b.row(v_b_first + h * v_b_stride), .rows = value, .cols = v_b.cols};
  }
};

// A mixture-of-experts FFN (model_config.h MoeConfig; E experts of width f).
struct MoeLayerWeights {
  WeightView router;                       // [E][dim]
  std::vector<WeightView> gate, up, down;  // [E]: [f][dim], [f][dim], [dim][f]
  WeightView shared_gate, shared_up;       // [shared x f][dim]; rows 0 without shared experts
  WeightView shared_down;                  // [dim][shared x f]
};

struct DecoderLayerWeights {
  std::vector<float> attn_norm;  // [dim]
  WeightView wq;                 // [q_dim][dim]
  WeightView wk;                 // [kv_dim][dim]
  WeightView wv;                 // [kv_dim][dim]
  WeightView wo;                 // [dim][q_dim]
  // Q/K/V biases when the config has them (Qwen2), empty otherwise.
  std::vector<float> bq;        // [q_dim]
  std::vector<float> bk;        // [kv_dim]
  std::vector<float> bv;        // [kv_dim]
  std::vector<float> ffn_norm;  // [dim]
  WeightView w_gate;            // [ffn][dim]  (llama2.c w1)
  WeightView w_up;              // [ffn][dim]  (w3)
  WeightView w_down;            // [dim][ffn]  (w2)
  // Gemma 3 only (empty otherwise): RMSNorm of each query and key head, and of the attention and FFN outputs.
  std::vector<float> q_norm;               // [head_dim]
  std::vector<float> k_norm;               // [head_dim]
  std::vector<float> post_attention_norm;  // [dim]
  std::vector<float> post_ffw_norm;        // [dim]
  // DeepSeek-V2 only: its attention (wo is [dim][H x value]; wq the queries without q_lora), and in its MoE layers
  // the experts (w_gate/w_up/w_down: the dense FFN of its leading layers).
  MlaLayerWeights mla;
  MoeLayerWeights moe;
};

// The matrices of a layer that the packed kernels may read in their own layout: all but the embedding and MLA's
// per-head slices (kv_b, k_b, v_b are read a head's rows at a time).
std::vector<WeightView*> packable_matrices(DecoderLayerWeights& layer);

enum class WeightPacking {
  kNone,    // every matrix as stored in the file
  kForCpu,  // matrices packed when packed_layout_for(type) has a layout for this CPU (on every hardware thread)
};

struct DecoderWeights {
  WeightView token_embedding;  // [vocab][dim]
  std::vector<DecoderLayerWeights> layers;
  std::vector<float> output_norm;    // [dim]
  WeightView output;                 // [vocab][dim]; the embedding when tied (packed: a packed copy)
  std::vector<PackedMatrix> packed;  // owns the packed matrices the views above point into
  // A tensor-parallel rank's column slices of row-parallel matrices (attention output, down), unless packed.
  std::vector<std::vector<std::byte>> sliced;
  size_t experts_used = 0;  // MoE: routed experts per token (for matrix_bytes)

  // `shard` (tensor parallelism): only that rank's rows and columns (model/tensor_shard.h); null: every weight.
  static Expected<DecoderWeights> from_gguf(const gguf::File& file, const ModelConfig& config,
                                            WeightPacking packing = WeightPacking::kForCpu,
                                            const ShardRanges* shard = nullptr);
  // Bytes of every matrix read per decoded token (incl. output; of a MoE layer its router, shared experts and as many
  // routed experts as a token uses, at their mean size).
  size_t matrix_bytes() const;
  bool has_packed_matrices() const { return !packed.empty(); }
};

}  // namespace kvs
