// Synthetic models: random weights of any shape (MHA, MQA, GQA; llama or gemma3 architecture) with a
// small working SentencePiece-style vocabulary, for tests and benchmarks without downloads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace kvs {

struct SynthSpec {
  std::string architecture = "llama";  // or "gemma3": its q/k norms, post-norms, tied output, sliding windows
  uint32_t layers = 2;
  uint32_t dim = 64;
  uint32_t heads = 4;
  uint32_t kv_heads = 4;
  uint32_t ffn = 128;
  uint32_t vocab = 512;
  uint32_t ctx = 512;
  DType type = DType::kF32;
  uint64_t seed = 1;
  float rope_base = 10000.0f;
  bool tied_output = false;     // true: no output.weight; the classifier is token_embd.weight (gemma3: always)
  uint32_t head_dim = 0;        // 0: dim / heads (Gemma 3: 256 whatever the width)
  uint32_t sliding_window = 0;  // gemma3: the window of its local layers (5 of every 6), required
};

// Presets: "110m" (llama2.c 110M shape), "1b" (TinyLlama 1.1B shape), "tiny-mha", "tiny-mqa",
// "tiny-gqa" (dim 64, 2 layers, 4 heads, 4/1/2 kv heads, ffn 128, vocab 512); "gemma3-270m" and
// "gemma3-1b" (Gemma 3's shapes: 18/26 layers, dim 640/1152, 4 heads of 256, 1 KV head, window 512,
// vocab 262144), "tiny-gemma3" (7 layers: window layers on both sides of a global one; dim 64, 4 heads
// of 32, 2 KV heads, window 8, vocab 512).
Expected<SynthSpec> synth_preset(std::string_view name);
std::vector<std::string_view> synth_preset_names();

// Checks the shape: everything non-zero, dim % heads == 0 (unless head_dim is given), heads % kv_heads == 0,
// even head_dim, vocab >= 259 (3 special + 256 byte tokens), for q8_0/q4_0 dim, ffn and heads x head_dim
// multiples of 32, and a known architecture (gemma3 with a window).
Status validate_synth_spec(const SynthSpec& spec);

// Writes the model to `path`, streaming one tensor at a time (memory ~ the largest tensor).
// Weights are uniform random with std 1/sqrt(row length) from a splitmix64 stream seeded by
// (seed, tensor name, row): identical bytes on every platform. Norm weights are 1, except for a
// tied classifier: then token_embd is 10x smaller and output_norm.weight is 10 (see synth.cpp).
Status write_synth_model(const SynthSpec& spec, const std::string& path);

}  // namespace kvs
