// What the decoder forward passes share (one subclass per family: llama_forward, gemma3_forward): the
// activations of a batch, the embedding lookup, projections that share one quantization of their input,
// the batch's K/V stores, attention over the batch, and the logits of the rows asked for.
#pragma once

#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "attention/batch_attention.h"
#include "attention/write_kv.h"
#include "core/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/decoder_weights.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "model/model_config.h"
#include "parallel/communicator.h"
#include "tensor/matmul.h"

namespace kvs {

class DecoderForward : public ModelRunner {
 protected:
  // config: what this rank computes (model/tensor_shard.h shard_config; the model's own without tensor
  // parallelism); tp: the ranks' communicator, or null for a whole model.
  DecoderForward(const ModelConfig& config, const DecoderWeights& weights, ThreadPool& pool,
                 Communicator* tp = nullptr);

  // Checks the batch against the model and the storage, sizes the activations for its n tokens, and fills
  // x with their embedding rows (times the config's embedding scale). Returns n.
  size_t begin(const ForwardBatch& batch, std::span<const KvStorage> kv, std::span<const float> logits);
  // outs[i] = x . weights[i]^T for matrices that read the same input; quantized weights share one
  // quantization of x.
  void project(std::span<const float> x, size_t n, std::initializer_list<std::pair<const WeightView*, float*>> outs);
  // Per token (over the pool): fn(t) for t < n.
  template <typename Fn>
  void for_tokens(size_t n, Fn&& fn) {
    pool_.parallel_for(n, 1, [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) fn(t);
    });
  }
  // Whether a KV storage of `spec` holds what this forward pass stores (default: K and V of the config's heads).
  virtual bool kv_matches(const KvCacheSpec& spec) const;
  // Writes k_ and v_ of the batch's tokens into their slots of `layer` (in its group's storage).
  void store_kv(const ForwardBatch& batch, std::span<KvStorage> kv, size_t layer);
  // The same for rows of `width` floats per token: k [n][width] and v [n][width], or v empty (an MLA latent).
  void store_rows(const ForwardBatch& batch, std::span<KvStorage> kv, size_t layer, std::span<const float> k,
                  std::span<const float> v, size_t width);
  // att_ = attention of q_ over `layer`'s cached K/V, within the layer's window.
  void attend(const ForwardBatch& batch, std::span<const KvStorage> kv, size_t layer);
  // RoPE at one base: inverse frequencies once per model, cos/sin per batch.
  struct Rope {
    std::vector<float> inv_freq;  // [rope_dim / 2]
    std::vector<float> cos, sin;  // [n][rope_dim / 2] for the batch's positions
  };
  // rope.cos/sin of the batch's positions.
  void rope_tables(std::span<const uint32_t> positions, Rope& rope) const;
  // Rotates the n_heads heads of token t (back to back in `heads`) by its angles, in the config's RoPE style.
  void rotate(std::span<float> heads, size_t n_heads, const Rope& rope, size_t t) const;
  // gate_[t] = act(gate_[t]) * up_[t] for the batch's n rows (act: swiglu, geglu), split over the pool.
  template <typename Activation>
  void gate_activation(size_t n, Activation act) {
    const size_t f = config_.ffn_dim;
    pool_.parallel_for(n, 1, [&](size_t begin, size_t end) {
      act(std::span(&gate_[begin * f], (end - begin) * f), std::span<const float>(&up_[begin * f], (end - begin) * f));
    });
  }
  // The next-token logits of the rows asked for: final norm, the output matrix, the soft-cap if any.
  void compute_logits(const ForwardBatch& batch, std::span<float> logits);
  // x += y over the batch's n rows of dim.
  void add_to_residual(std::span<const float> y, size_t n);
  // Tensor parallelism: y's n rows of dim <- their sum over every rank (a row-parallel projection's partial
  // products). Nothing without it.
  void sum_over_ranks(std::span<float> y, size_t n);
  bool is_root() const { return tp_ == nullptr || tp_->rank() == 0; }
  // Runs one of the ranks' collectives, counting it and its time.
  template <typename Collective>
  void timed(Collective collective);

 public:
  double communication_seconds() const override { return communication_seconds_; }
  uint64_t num_collectives() const override { return num_collectives_; }

 protected:
  void rmsnorm_rows(std::span<float> out, std::span<const float> in, std::span<const float> weight, size_t n) const;

  const ModelConfig& config_;
  const DecoderWeights& weights_;
  ThreadPool& pool_;
  Communicator* tp_;  // null: not tensor-parallel
  double communication_seconds_ = 0.0;
  uint64_t num_collectives_ = 0;
  BatchAttention attention_;
  // Activations, [n_tokens][width] row-major; grown on demand, reused across calls.
  std::vector<float> x_;                             // residual stream [n][dim]
  std::vector<float> xb_;                            // normed input [n][dim]
  std::vector<float> q_;                             // [n][q_dim]
  std::vector<float> k_;                             // [n][kv_dim]
  std::vector<float> v_;                             // [n][kv_dim]
  std::vector<std::vector<KvWriteRun>> write_runs_;  // [group]: the batch's K/V stores, one per block run
  std::vector<float> att_;                           // attention output [n][q_dim]
  std::vector<float> proj_;                          // output of wo / w_down [n][dim]
  std::vector<float> gate_;                          // [n][ffn]
  std::vector<float> up_;                            // [n][ffn]
  std::vector<float> final_;                         // normed rows whose logits are wanted [m][dim]
  std::vector<float> local_logits_;                  // tensor parallelism: this rank's vocabulary slice [m][v_r]
  std::vector<float> gathered_logits_;               // at rank 0: every rank's slice, rank after rank
  MatmulScratch scratch_;                            // converted activations, reused across calls
  QuantizedActivations xq_;                          // x quantized once for several Q8_0/Q4_0 matrices
};

}  // namespace kvs
