// Hyper-parameters of a decoder (Llama family: Llama 1-3, Mistral, Qwen2; Gemma 3; DeepSeek-V2's latent attention
// and mixture of experts), read from GGUF metadata and validated once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"

namespace kvs {

enum class RopeStyle {
  kInterleaved,  // pairs (2i, 2i + 1): GGUF llama (the converter permutes Q/K rows for it)
  kNeox,         // pairs (i, i + d/2): GGUF gemma3 and qwen2, as the checkpoint has it
};

// Multi-head latent attention (DeepSeek-V2, GGUF deepseek2). Per token and layer the cache holds the normalised
// latent c (kv_lora_rank) and one RoPE'd key part k_pe (rope_dim, shared by all heads). Head h's query is
// [q_nope (nope_dim) | q_pe (rope_dim)], its key [W_kb[h] c | k_pe], its value W_vb[h] c (value_dim).
struct MlaConfig {
  size_t q_lora_rank = 0;   // > 0: queries through a low-rank pair (attn_q_a, its norm, attn_q_b); 0: attn_q
  size_t kv_lora_rank = 0;  // latent width; > 0 marks an MLA model
  size_t nope_dim = 0;      // per head: the query/key part without RoPE (the head dim less rope_dim)
  size_t value_dim = 0;     // per head: value width
  bool split_kv_b = false;  // the file has attn_k_b/attn_v_b per head (newer converters) instead of attn_kv_b
};

// A mixture-of-experts FFN (DeepSeek-V2): after `leading_dense_layers` dense layers, each layer routes every token
// to `experts_used` of `num_experts` SwiGLU experts of width expert_ffn_dim by its router's top scores, and adds
// `shared_experts` always-on experts (one SwiGLU of width shared_experts x expert_ffn_dim).
enum class ExpertGating { kSoftmax, kSigmoid };
struct MoeConfig {
  size_t num_experts = 0;  // 0: a dense model
  size_t experts_used = 0;
  size_t shared_experts = 0;
  size_t expert_ffn_dim = 0;
  size_t leading_dense_layers = 0;
  ExpertGating gating = ExpertGating::kSoftmax;
  bool normalize_weights = false;  // the chosen experts' weights are divided by their sum
  float weights_scale = 1.0f;      // then multiplied by this (routed_scaling_factor)

  bool is_moe_layer(size_t layer) const { return num_experts > 0 && layer >= leading_dense_layers; }
};

struct ModelConfig {
  std::string architecture = "llama";
  std::string name;
  size_t num_layers = 0;
  size_t dim = 0;           // embedding width
  size_t num_heads = 0;     // query heads
  size_t num_kv_heads = 0;  // == num_heads: MHA; 1: MQA; a divisor: GQA
  size_t head_dim = 0;      // dim / num_heads unless the file says otherwise
  size_t ffn_dim = 0;       // SwiGLU hidden width
  size_t vocab_size = 0;
  size_t context_length = 0;
  size_t rope_dim = 0;  // leading dimensions of each head that RoPE rotates
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;  // output matrix shared with the token embedding
  RopeStyle rope_style = RopeStyle::kInterleaved;
  // Sliding-window attention: [num_layers] windows in tokens, 0 for a full-attention (global) layer; empty when
  // every layer is global. A window layer's token at position p sees positions (p - window, p].
  std::vector<uint32_t> layer_windows = {};
  float rope_freq_base_local = 0.0f;  // RoPE base of the window layers; 0: rope_freq_base (Gemma 3: 10000)
  float rope_freq_scale = 1.0f;       // global layers' linear RoPE scaling: angles x this (1 / factor)
  // Llama 3.1+ RoPE scaling (the file's rope_freqs.weight, [rope_dim / 2]): pair i's angle is divided by
  // rope_freq_factors[i] (1 for high frequencies, the scaling factor for low ones). Empty: no factors.
  std::vector<float> rope_freq_factors = {};
  bool qkv_bias = false;             // Q, K and V projections add a bias (Qwen2; optional in llama files)
  float embedding_scale = 1.0f;      // the embedding row is multiplied by this (Gemma: sqrt(dim))
  float attention_scale = 0.0f;      // multiplier of q . k; 0: 1 / sqrt(head_dim)
  float final_logit_softcap = 0.0f;  // > 0: logits = cap x tanh(logits / cap)
  // YaRN RoPE scaling (DeepSeek-V2): pair i's angle interpolates between the unscaled one and the one divided by the
  // factor, by a ramp over the pairs whose wavelengths lie between original_context / beta_fast and / beta_slow
  // rotations; rope_freq_scale = 1 / factor. yarn_original_context 0: no YaRN.
  size_t yarn_original_context = 0;
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
  float yarn_log_multiplier = 0.0f;  // attention scores x (1 + this x ln(factor))^2 (DeepSeek's mscale^2)
  MlaConfig mla = {};
  MoeConfig moe = {};

  static Expected<ModelConfig> from_gguf(const gguf::File& file);
  Status validate() const;

  size_t q_dim() const { return num_heads * head_dim; }
  size_t kv_dim() const { return num_kv_heads * head_dim; }
  size_t group_size() const { return num_heads / num_kv_heads; }  // query heads per KV head
  std::string attention_kind() const;                             // "MHA", "MQA", "GQA" or "MLA"
  // The window of `layer`'s attention in tokens, 0 for full attention.
  size_t window_of(size_t layer) const { return layer_windows.empty() ? 0 : layer_windows[layer]; }
  bool is_gemma3() const { return architecture == "gemma3"; }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  // MLA: what the attention kernel sees in absorbed form, one KV "head" per token: the latent and the RoPE'd key.
  size_t latent_width() const { return mla.kv_lora_rank + rope_dim; }
  // RoPE inverse frequencies [rope_dim / 2] of the global (full-attention) layers: base^(-2i/rope_dim) x
  // rope_freq_scale / rope_freq_factors[i]; of Gemma 3's window layers (`local`): the local base, unscaled.
  std::vector<float> rope_frequencies(bool local = false) const;
};

}  // namespace kvs
