// The Gemma 3 decoder forward pass over a batch of tokens: the embedding scaled by sqrt(dim); per layer
// RMSNorm, Q/K/V, an RMSNorm of every query and key head, NeoX RoPE (base 10000 on window layers, the
// file's base and linear scaling on global ones), attention over the layer's sliding window or the whole
// context, an RMSNorm of the attention output before the residual add; then the same pre- and post-norm
// around a GELU-gated FFN. Norm weights are used as stored (llama.cpp's converter already added Gemma's 1).
#pragma once

#include <vector>

#include "model/decoder_forward.h"
#include "model/decoder_model.h"

namespace kvs {

class Gemma3Forward final : public DecoderForward {
 public:
  Gemma3Forward(const DecoderModel& model, ThreadPool& pool);

  void forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) override;

 private:
  Rope local_, global_;       // RoPE of the window (local) layers and of the global ones
  float query_scale_ = 1.0f;  // the attention kernel divides by sqrt(head_dim); this makes it attention_scale
};

}  // namespace kvs
