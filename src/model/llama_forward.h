// The Llama decoder forward pass over a batch of tokens (prefill chunks and decode tokens of any
// number of sequences alike): RMSNorm, Q/K/V (plus biases: Qwen2), RoPE (interleaved; NeoX for Qwen2; with
// Llama 3.1's per-pair factors or linear scaling), attention (on every layer's sliding window when the model
// has one, as Mistral 7B v0.1), SwiGLU.
#pragma once

#include <vector>

#include "model/decoder_forward.h"
#include "model/decoder_model.h"

namespace kvs {

class LlamaForward final : public DecoderForward {
 public:
  LlamaForward(const DecoderModel& model, ThreadPool& pool);

  // logits: [batch.logits_for.size()][vocab_size]. The KV storage's shape must match the model.
  void forward(const ForwardBatch& batch, std::span<KvStorage> kv, std::span<float> logits) override;

 private:
  Rope rope_;
};

}  // namespace kvs
