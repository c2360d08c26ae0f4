// Reads a Vocab from GGUF metadata (tokenizer.ggml.*), the keys llama.cpp's converter writes.
#pragma once

#include "core/status.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace kvs {

// Required: tokenizer.ggml.model ("llama" or "gpt2"), .tokens, .scores (llama), .merges (gpt2).
// Optional: .pre, .token_type, .bos/.eos/.unknown/.padding/.eot_token_id (-1 or 0xFFFFFFFF: none),
// .add_bos_token (default: true for llama, false for gpt2), .add_space_prefix (default: true
// for llama). Errors name the key and the values found.
Expected<Vocab> vocab_from_gguf(const gguf::File& file);

}  // namespace kvs
