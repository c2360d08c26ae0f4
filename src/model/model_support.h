// What the forward passes implement, checked against a GGUF file before it is run: the architecture
// must be one with a forward pass (llama, mistral, qwen2, gemma3), and every metadata key under its prefix and
// every tensor must be one that pass reads (or one that carries no math); anything else is "not
// supported", naming the key or tensor, never an approximate run with wrong logits.
#pragma once

#include <string_view>

#include "core/status.h"
#include "gguf/gguf.h"

namespace kvs {

// Llama (llama, mistral: RMSNorm, interleaved RoPE, SwiGLU; qwen2: with Q/K/V biases and NeoX RoPE), or Gemma 3 (the
// Llama block plus q/k norms, post-norms, GELU, interleaved sliding windows).
bool is_supported_architecture(std::string_view architecture);
std::string_view supported_architectures();  // for messages: "llama, mistral, qwen2, gemma3"

// Metadata under "<architecture>." that the forward pass does not implement (RoPE scaling other than linear
// (Llama 3.1's is the rope_freqs tensor), experts, soft-capping of attention scores, ...) is an unimplemented error
// naming key and value.
Status check_metadata(const gguf::File& file, std::string_view architecture, size_t head_dim);
// A tensor the forward pass would not read (biases other than Q/K/V's, rope_freqs outside the Llama family,
// experts, ...) is an unimplemented error naming it.
Status check_tensors(const gguf::File& file, std::string_view architecture, size_t num_layers);

}  // namespace kvs
