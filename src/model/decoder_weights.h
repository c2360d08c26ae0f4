// Views of a decoder's weights inside the mapped GGUF file, checked against the config: the Llama block's,
// Qwen2's Q/K/V biases, Gemma 3's q/k norms and post-norms.
// 1-D norm weights are converted to owned fp32 vectors; matrices stay in the file's dtype. Q8_0, Q4_0,
// Q4_K, Q5_K and Q6_K matrices are repacked into owned memory for the int8 dot-product kernels (WeightPacking::kForCpu:
// groups of 16 rows with AVX-512 VNNI, of 8 with AVX2): the same values, in a layout the kernels read without unpacking
// or horizontal sums (tensor/packed_weights.h).
#pragma once

#include <vector>

#include "core/status.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "tensor/packed_weights.h"
#include "tensor/weight_view.h"

namespace kvs {

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
};

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

  static Expected<DecoderWeights> from_gguf(const gguf::File& file, const ModelConfig& config,
                                            WeightPacking packing = WeightPacking::kForCpu);
  size_t matrix_bytes() const;  // bytes of every matrix read per decoded token (incl. output)
  bool has_packed_matrices() const { return !packed.empty(); }
};

}  // namespace kvs
