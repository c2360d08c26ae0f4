// Synthetic llama-architecture models: random weights of any shape (MHA, MQA, GQA) with a small
// working SentencePiece-style vocabulary, for tests and benchmarks without downloads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace kvs {

struct SynthSpec {
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
  bool tied_output = false;  // true: no output.weight; the classifier is token_embd.weight
};

// Presets: "110m" (llama2.c 110M shape), "1b" (TinyLlama 1.1B shape), "tiny-mha", "tiny-mqa",
// "tiny-gqa" (dim 64, 2 layers, 4 heads, 4/1/2 kv heads, ffn 128, vocab 512).
Expected<SynthSpec> synth_preset(std::string_view name);
std::vector<std::string_view> synth_preset_names();

// Checks the shape: everything non-zero, dim % heads == 0, heads % kv_heads == 0, even head_dim,
// vocab >= 259 (3 special + 256 byte tokens), and for q8_0/q4_0 dim and ffn multiples of 32.
Status validate_synth_spec(const SynthSpec& spec);

// Writes the model to `path`, streaming one tensor at a time (memory ~ the largest tensor).
// Weights are uniform random with std 1/sqrt(row length) from a splitmix64 stream seeded by
// (seed, tensor name, row): identical bytes on every platform. Norm weights are 1, except for a
// tied classifier: then token_embd is 10x smaller and output_norm.weight is 10 (see synth.cpp).
Status write_synth_model(const SynthSpec& spec, const std::string& path);

}  // namespace kvs
