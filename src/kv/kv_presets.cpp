#include "kv/kv_presets.h"

namespace kvs {

const std::vector<KvModelPreset>& kv_model_presets() {
  static const std::vector<KvModelPreset> presets = {
      {"llama-2-7b", {.num_layers = 32, .num_kv_heads = 32, .head_dim = 128}, 4096},
      {"llama-2-13b", {.num_layers = 40, .num_kv_heads = 40, .head_dim = 128}, 4096},
      {"llama-3-8b", {.num_layers = 32, .num_kv_heads = 8, .head_dim = 128}, 8192},
      {"llama-3-70b", {.num_layers = 80, .num_kv_heads = 8, .head_dim = 128}, 131072},
      {"mistral-7b", {.num_layers = 32, .num_kv_heads = 8, .head_dim = 128}, 32768},
      // Gemma 3 (config.json of each release): 5 layers of a sliding window to 1 global one.
      {"gemma-3-270m", {.num_layers = 18, .num_kv_heads = 1, .head_dim = 256}, 32768, 512, 6},
      {"gemma-3-1b", {.num_layers = 26, .num_kv_heads = 1, .head_dim = 256}, 32768, 512, 6},
      {"gemma-3-4b", {.num_layers = 34, .num_kv_heads = 4, .head_dim = 256}, 131072, 1024, 6},
      {"gemma-3-12b", {.num_layers = 48, .num_kv_heads = 8, .head_dim = 256}, 131072, 1024, 6},
      {"gemma-3-27b", {.num_layers = 62, .num_kv_heads = 16, .head_dim = 128}, 131072, 1024, 6},
      {"qwen2.5-7b", {.num_layers = 28, .num_kv_heads = 4, .head_dim = 128}, 131072},
      {"deepseek-v2-lite", {.num_layers = 27, .mla = true, .kv_lora_rank = 512, .rope_dim = 64}, 163840},
      {"synth-1b", {.num_layers = 22, .num_kv_heads = 4, .head_dim = 64}, 2048},
      {"synth-110m", {.num_layers = 12, .num_kv_heads = 12, .head_dim = 64}, 1024},
      {"stories260k", {.num_layers = 5, .num_kv_heads = 4, .head_dim = 8}, 512},
  };
  return presets;
}

}  // namespace kvs
