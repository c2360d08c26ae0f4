// The Llama decoder forward pass over a batch of tokens (prefill chunks and decode tokens of any
// number of sequences alike). Reads weights, writes each token's K/V into its slot, reads
// context K/V through the block tables, and returns logits for the requested tokens.
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "attention/batch_attention.h"
#include "attention/write_kv.h"
#include "core/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/llama_model.h"
#include "model/model.h"
#include "tensor/matmul.h"

namespace kvs {

class LlamaForward final : public ModelRunner {
 public:
  LlamaForward(const LlamaModel& model, ThreadPool& pool);

  // logits: [batch.logits_for.size()][vocab_size]. The KV storage's shape must match the model.
  void forward(const ForwardBatch& batch, KvStorage& kv, std::span<float> logits) override;

 private:
  void resize(size_t n_tokens);
  // outs[i] = x . weights[i]^T for matrices that read the same input; quantized weights share one
  // quantization of x.
  void project(std::span<const float> x, size_t n, std::initializer_list<std::pair<const WeightView*, float*>> outs);

  const ModelConfig& config_;
  const LlamaWeights& weights_;
  ThreadPool& pool_;
  BatchAttention attention_;
  // Activations, [n_tokens][width] row-major; grown on demand, reused across calls.
  std::vector<float> x_;                    // residual stream [n][dim]
  std::vector<float> xb_;                   // normed input [n][dim]
  std::vector<float> q_;                    // [n][q_dim]
  std::vector<float> k_;                    // [n][kv_dim]
  std::vector<float> v_;                    // [n][kv_dim]
  std::vector<KvWriteRun> write_runs_;      // the batch's K/V stores, one per block run
  std::vector<float> att_;                  // attention output [n][q_dim]
  std::vector<float> proj_;                 // output of wo / w_down [n][dim]
  std::vector<float> gate_;                 // [n][ffn]
  std::vector<float> up_;                   // [n][ffn]
  std::vector<float> final_;                // normed rows whose logits are wanted [m][dim]
  MatmulScratch scratch_;                   // converted activations, reused across calls
  QuantizedActivations xq_;                 // x quantized once for several Q8_0/Q4_0 matrices
  std::vector<float> rope_inv_freq_;        // [rope_dim / 2], once per model
  std::vector<float> rope_cos_, rope_sin_;  // [n][rope_dim / 2] for this batch's positions
};

}  // namespace kvs
