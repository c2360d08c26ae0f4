// Synthetic models: random weights of any shape (MHA, MQA, GQA; llama, qwen2 or gemma3 architecture, Llama 3.1 or
// linear RoPE scaling) with a small working SentencePiece-style vocabulary, for tests and benchmarks without
// downloads. Tensor and metadata names are llama.cpp's converter's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace kvs {

// RoPE scaling as files carry it: linear (`rope.scaling.type`/`factor` metadata), or Llama 3.1's per-pair
// factors (the tensor rope_freqs.weight, computed as llama.cpp's converter does from HF rope_scaling).
// YaRN: deepseek2's (`rope.scaling.type` yarn, factor, original context, yarn_log_multiplier).
enum class SynthRopeScaling { kNone, kLinear, kLlama3, kYarn };

// DeepSeek-V2's latent attention and experts (architecture "deepseek2"; head_dim is the key head: nope + rope).
struct SynthMla {
  uint32_t kv_lora_rank = 0;  // latent width
  uint32_t q_lora_rank = 0;   // 0: queries from attn_q; else attn_q_a, its norm, attn_q_b
  uint32_t rope_dim = 0;      // the decoupled RoPE part of each key and query head
  uint32_t value_dim = 0;     // value head width
  bool split_kv_b = false;    // attn_k_b/attn_v_b per head (newer converters' files) instead of attn_kv_b
  uint32_t experts = 0;       // 0: every layer a dense FFN (of width ffn)
  uint32_t experts_used = 0;
  uint32_t shared_experts = 0;
  uint32_t expert_ffn = 0;
  uint32_t leading_dense = 0;  // dense layers before the first MoE layer
  bool expert_weights_norm = false;
  float expert_weights_scale = 1.0f;
  float yarn_log_multiplier = 0.0f;  // with rope_scaling kYarn
};

struct SynthSpec {
  // "llama", "qwen2" (Q/K/V biases, NeoX RoPE), "gemma3" (q/k norms, post-norms, tied output, sliding windows) or
  // "deepseek2" (latent attention, optional experts: `mla`)
  std::string architecture = "llama";
  uint32_t layers = 2;
  uint32_t dim = 64;
  uint32_t heads = 4;
  uint32_t kv_heads = 4;
  uint32_t ffn = 128;
  uint32_t vocab = 512;
  uint32_t ctx = 512;
  DType type = DType::kF32;
  bool mixed_k = false;  // with type Q4_K or Q5_K: llama.cpp's _M recipe (WeightTypes, llama2c_import.h)
  uint64_t seed = 1;
  float rope_base = 10000.0f;
  bool tied_output = false;     // true: no output.weight; the classifier is token_embd.weight (gemma3: always)
  uint32_t head_dim = 0;        // 0: dim / heads (Gemma 3: 256 whatever the width)
  uint32_t sliding_window = 0;  // gemma3: the window of its local layers (5 of every 6), required; llama: every layer
  bool qkv_bias = false;        // Q/K/V biases (qwen2: always)
  SynthRopeScaling rope_scaling = SynthRopeScaling::kNone;
  float rope_factor = 1.0f;            // linear: angles / factor; llama3: the factor of the low frequencies
  uint32_t rope_original_context = 0;  // llama3: original_max_position_embeddings (8192 in Llama 3.1/3.2)
  float rope_low_freq_factor = 1.0f;   // llama3: wavelengths above original / this are scaled by the factor
  float rope_high_freq_factor = 4.0f;  // llama3: wavelengths below original / this are not scaled
  SynthMla mla = {};                   // deepseek2
  // A GGUF whose tokenizer.* keys replace synth's vocabulary (vocab then = its token count), so a
  // random-weight model carries a real model's tokenizer and chat template. Empty: synth's own.
  std::string tokenizer_from = {};
  // A Jinja chat template written as tokenizer.chat_template (after tokenizer_from's keys). Empty: none (or theirs).
  std::string chat_template = {};
};

// Llama 3.1's RoPE factors [rope_dim / 2] for `spec` (what synth writes as rope_freqs.weight): pair i of
// wavelength L = 2 pi base^(2i/rope_dim) gets 1 when L < original / high, the factor when L > original / low,
// and in between 1 / ((1 - s) / factor + s) with s = (original / L - low) / (high - low).
std::vector<float> llama3_rope_factors(const SynthSpec& spec, uint32_t rope_dim);

// Presets: "110m" (llama2.c 110M shape), "1b" (TinyLlama 1.1B shape), "llama3.2-1b", "qwen2.5-0.5b", "mistral-7b"
// (those models' shapes, RoPE and biases; vocabularies of their size but synth's tokens), "tiny-mha", "tiny-mqa",
// "tiny-gqa" (dim 64, 2 layers, 4 heads, 4/1/2 kv heads, ffn 128, vocab 512), "tiny-llama3" (tiny-gqa with
// Llama 3.1 RoPE factors over an original context of 64), "tiny-qwen2" (tiny-gqa as qwen2, tied), "tiny-mistral"
// (tiny-gqa with 1 KV head and a window of 16 on every layer, as Mistral 7B v0.1); "gemma3-270m" and
// "gemma3-1b" (Gemma 3's shapes: 18/26 layers, dim 640/1152, 4 heads of 256, 1 KV head, window 512,
// vocab 262144), "tiny-gemma3" (7 layers: window layers on both sides of a global one; dim 64, 4 heads
// of 32, 2 KV heads, window 8, vocab 512); "deepseek-v2-lite" (27 layers, dim 2048, 16 heads of 128 + 64, latent 512,
// 64 experts of 1408 of which 6 used, 2 shared, 1 dense layer of 10944, YaRN x40 over 4096, vocab 102400),
// "tiny-deepseek2" (3 layers: 1 dense, 2 of 8 experts with 2 used and 1 shared; dim 64, 4 heads of 32 + 16, latent
// 32, YaRN x4 over 64), "tiny-deepseek2-dense" (no experts), "tiny-deepseek2-qlora" (queries through rank 32, the
// split attn_k_b/attn_v_b).
Expected<SynthSpec> synth_preset(std::string_view name);
std::vector<std::string_view> synth_preset_names();

// Checks the shape: everything non-zero, dim % heads == 0 (unless head_dim is given), heads % kv_heads == 0,
// even head_dim, vocab >= 259 (3 special + 256 byte tokens), for q8_0/q4_0 dim, ffn and heads x head_dim
// multiples of 32 (K-quants: of 32 too; matrices whose rows are not whole super-blocks fall back to Q8_0), a known
// architecture (gemma3 with a window), RoPE scaling with its parameters (not on gemma3).
Status validate_synth_spec(const SynthSpec& spec);

// Writes the model to `path` (with spec.tokenizer_from: that file's tokenizer), streaming one tensor at a time (memory
// ~ the largest tensor). Weights are uniform random with std 1/sqrt(row length) from a splitmix64 stream seeded by
// (seed, tensor name, row): identical bytes on every platform. Norm weights are 1, except for a
// tied classifier: then token_embd is 10x smaller and output_norm.weight is 10 (see synth.cpp). Biases are
// uniform with std 0.5.
Status write_synth_model(const SynthSpec& spec, const std::string& path);

}  // namespace kvs
