// What the Llama forward pass implements, checked against a GGUF file before it is run: every
// metadata key under the architecture's prefix and every tensor must be one the forward pass
// reads (or one that carries no math); anything else is "not supported", naming the key or
// tensor, never an approximate run with wrong logits.
#pragma once

#include <string_view>

#include "core/status.h"
#include "model/gguf.h"

namespace kvs {

// Architectures with exactly the Llama block (RMSNorm, interleaved RoPE, SwiGLU, no biases).
bool is_llama_architecture(std::string_view architecture);

// Metadata under "<architecture>." that the forward pass does not implement (RoPE scaling,
// experts, sliding windows, soft-capping, ...) is an unimplemented error naming key and value.
Status check_llama_metadata(const gguf::File& file, std::string_view architecture, size_t head_dim,
                            size_t context_length);
// A tensor the forward pass would not read (biases, rope_freqs, experts, ...) is an unimplemented
// error naming it.
Status check_llama_tensors(const gguf::File& file, size_t num_layers);

}  // namespace kvs
