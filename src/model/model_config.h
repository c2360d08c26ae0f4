// Hyper-parameters of a Llama-family decoder, read from GGUF metadata and validated once.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "model/gguf.h"

namespace kvs {

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

  static Expected<ModelConfig> from_gguf(const gguf::File& file);
  Status validate() const;

  size_t q_dim() const { return num_heads * head_dim; }
  size_t kv_dim() const { return num_kv_heads * head_dim; }
  size_t group_size() const { return num_heads / num_kv_heads; }  // query heads per KV head
  std::string attention_kind() const;                             // "MHA", "MQA" or "GQA"
};

}  // namespace kvs
