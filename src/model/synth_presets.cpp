// The synthetic models' shape presets (kvserve synth --preset): real models' shapes with random weights.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/synth.h"

namespace kvs {

std::vector<std::string_view> synth_preset_names() {
  return {
      "110m",      "1b",          "llama3.2-1b",      "qwen2.5-0.5b",   "mistral-7b",           "tiny-mha",
      "tiny-mqa",  "tiny-gqa",    "tiny-llama3",      "tiny-qwen2",     "tiny-mistral",         "gemma3-270m",
      "gemma3-1b", "tiny-gemma3", "deepseek-v2-lite", "tiny-deepseek2", "tiny-deepseek2-dense", "tiny-deepseek2-qlora"};
}

Expected<SynthSpec> synth_preset(std::string_view name) {
  SynthSpec tiny{.layers = 2, .dim = 64, .heads = 4, .kv_heads = 4, .ffn = 128, .vocab = 512, .ctx = 512};
  if (name == "110m") {
    return SynthSpec{.layers = 12,
                     .dim = 768,
                     .heads = 12,
                     .kv_heads = 12,
                     .ffn = 2048,
                     .vocab = 32000,
                     .ctx = 1024,
                     .tied_output = true};
  }
  if (name == "1b") {
    return SynthSpec{.layers = 22, .dim = 2048, .heads = 32, .kv_heads = 4, .ffn = 5632, .vocab = 32000, .ctx = 2048};
  }
  // Gemma 3 as released (config.json of gemma-3-270m and gemma-3-1b-pt): query heads of 256 whatever the width.
  const auto gemma3 = [](uint32_t layers, uint32_t dim, uint32_t ffn) {
    return SynthSpec{.architecture = "gemma3",
                     .layers = layers,
                     .dim = dim,
                     .heads = 4,
                     .kv_heads = 1,
                     .ffn = ffn,
                     .vocab = 262144,
                     .ctx = 32768,
                     .rope_base = 1e6f,
                     .tied_output = true,
                     .head_dim = 256,
                     .sliding_window = 512};
  };
  if (name == "gemma3-270m") return gemma3(18, 640, 2048);
  if (name == "gemma3-1b") return gemma3(26, 1152, 6912);
  if (name == "tiny-gemma3") {
    return SynthSpec{.architecture = "gemma3",
                     .layers = 7,
                     .dim = 64,
                     .heads = 4,
                     .kv_heads = 2,
                     .ffn = 128,
                     .vocab = 512,
                     .ctx = 512,
                     .rope_base = 1e6f,
                     .tied_output = true,
                     .head_dim = 32,
                     .sliding_window = 8};
  }
  // Llama 3.2 1B, Qwen2.5 0.5B and Mistral 7B v0.3 as released (their config.json).
  if (name == "llama3.2-1b") {
    return SynthSpec{.layers = 16,
                     .dim = 2048,
                     .heads = 32,
                     .kv_heads = 8,
                     .ffn = 8192,
                     .vocab = 128256,
                     .ctx = 131072,
                     .rope_base = 500000.0f,
                     .tied_output = true,
                     .rope_scaling = SynthRopeScaling::kLlama3,
                     .rope_factor = 32.0f,
                     .rope_original_context = 8192};
  }
  if (name == "qwen2.5-0.5b") {
    return SynthSpec{.architecture = "qwen2",
                     .layers = 24,
                     .dim = 896,
                     .heads = 14,
                     .kv_heads = 2,
                     .ffn = 4864,
                     .vocab = 151936,
                     .ctx = 32768,
                     .rope_base = 1e6f,
                     .tied_output = true,
                     .qkv_bias = true};
  }
  if (name == "mistral-7b") {
    return SynthSpec{.layers = 32,
                     .dim = 4096,
                     .heads = 32,
                     .kv_heads = 8,
                     .ffn = 14336,
                     .vocab = 32768,
                     .ctx = 32768,
                     .rope_base = 1e6f};
  }
  if (name == "tiny-llama3") {
    // Original context 64 puts pair 0 below the unscaled wavelength (16), pairs 1-2 in the smooth band and the
    // rest at the factor, so every branch of the rule shows at positions a test reaches.
    tiny.kv_heads = 2;
    tiny.rope_scaling = SynthRopeScaling::kLlama3;
    tiny.rope_factor = 8.0f;
    tiny.rope_original_context = 64;
    return tiny;
  }
  if (name == "tiny-qwen2") {
    tiny.architecture = "qwen2";
    tiny.kv_heads = 2;
    tiny.rope_base = 1e6f;
    tiny.tied_output = true;
    tiny.qkv_bias = true;
    return tiny;
  }
  if (name == "tiny-mistral") {
    tiny.kv_heads = 1;
    tiny.rope_base = 1e6f;
    tiny.sliding_window = 16;
    return tiny;
  }
  // DeepSeek-V2-Lite as released (config.json): MLA without a query rank, 64 routed experts and 2 shared.
  if (name == "deepseek-v2-lite") {
    return SynthSpec{.architecture = "deepseek2",
                     .layers = 27,
                     .dim = 2048,
                     .heads = 16,
                     .kv_heads = 16,
                     .ffn = 10944,
                     .vocab = 102400,
                     .ctx = 163840,
                     .head_dim = 192,
                     .rope_scaling = SynthRopeScaling::kYarn,
                     .rope_factor = 40.0f,
                     .rope_original_context = 4096,
                     .mla = {.kv_lora_rank = 512,
                             .rope_dim = 64,
                             .value_dim = 128,
                             .experts = 64,
                             .experts_used = 6,
                             .shared_experts = 2,
                             .expert_ffn = 1408,
                             .leading_dense = 1,
                             .yarn_log_multiplier = 0.0707f}};
  }
  if (name.starts_with("tiny-deepseek2")) {
    // YaRN over an original context of 64 puts pairs on both sides of the ramp and in it at positions tests reach.
    SynthSpec d{.architecture = "deepseek2",
                .layers = 3,
                .dim = 64,
                .heads = 4,
                .kv_heads = 4,
                .ffn = 128,
                .vocab = 512,
                .ctx = 512,
                .head_dim = 48,
                .rope_scaling = SynthRopeScaling::kYarn,
                .rope_factor = 4.0f,
                .rope_original_context = 64,
                .mla = {.kv_lora_rank = 32,
                        .rope_dim = 16,
                        .value_dim = 32,
                        .experts = 8,
                        .experts_used = 2,
                        .shared_experts = 1,
                        .expert_ffn = 32,
                        .leading_dense = 1,
                        .yarn_log_multiplier = 0.1f}};
    if (name == "tiny-deepseek2") return d;
    if (name == "tiny-deepseek2-dense") {
      d.mla.experts = d.mla.experts_used = d.mla.shared_experts = d.mla.expert_ffn = d.mla.leading_dense = 0;
      return d;
    }
    if (name == "tiny-deepseek2-qlora") {
      d.mla.q_lora_rank = 32;
      d.mla.split_kv_b = true;
      d.mla.expert_weights_norm = true;
      d.mla.expert_weights_scale = 2.0f;
      return d;
    }
  }
  if (name == "tiny-mha") return tiny;
  if (name == "tiny-mqa") {
    tiny.kv_heads = 1;
    return tiny;
  }
  if (name == "tiny-gqa") {
    tiny.kv_heads = 2;
    return tiny;
  }
  return Status::invalid_argument(
      fmt::format("unknown synth preset '{}'; known presets: {}", name, fmt::join(synth_preset_names(), ", ")));
}

}  // namespace kvs
