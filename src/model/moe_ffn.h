// A DeepSeek-V2 mixture-of-experts FFN over a batch: every token's router logits choose its experts
// (model/moe_routing.h); each expert runs once over the tokens routed to it (a SwiGLU: down(silu(gate x) * up x)),
// and a token's output is the shared experts' SwiGLU plus its experts' outputs times their weights, added in
// expert-index order, so a token's result does not depend on which other tokens share its batch.
#pragma once

#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/decoder_weights.h"
#include "model/model_config.h"
#include "model/moe_routing.h"
#include "tensor/matmul.h"

namespace kvs {

class MoeFfn {
 public:
  MoeFfn(const ModelConfig& config, ThreadPool& pool) : config_(config), pool_(pool) {}

  // out: [n][dim] = the layer's MoE FFN of x: [n][dim].
  void run(const MoeLayerWeights& w, std::span<const float> x, size_t n, std::span<float> out);
  // The experts chosen for the batch's tokens by the last run: [n][experts_used].
  std::span<const ExpertChoice> choices() const { return choices_; }

 private:
  // One expert's (or the shared experts') part of a grouped run: elements [offset, offset + m * f) of gate_/up_ hold
  // its hidden states for the m tokens it runs over (m = n for the shared experts).
  struct ExpertPart {
    const WeightView *gate, *up, *down;
    size_t expert;  // its index, or the number of experts for the shared experts
    size_t m, offset;
  };

  // Every matrix takes int8 activations (Q8_0/Q4_0/K-quants): run_grouped applies.
  static bool int8_activations(const MoeLayerWeights& w);
  // out = shared experts + routed experts of x, as one expert at a time does (bitwise): x quantized once, every gate
  // and up in one pass of the pool, every down in another (decode made three passes an expert, whose hand-offs were 9%
  // of a Lite token); at prefill each part's hidden states are quantized in passes of their own.
  void run_grouped(const MoeLayerWeights& w, std::span<const float> x, size_t n, std::span<float> out);
  // y [m][dim] = down(silu(gate x) * up x) for m rows of x through one expert's (or the shared experts') matrices.
  void swiglu_expert(const WeightView& gate, const WeightView& up, const WeightView& down, std::span<const float> x,
                     size_t m, std::span<float> y);

  const ModelConfig& config_;
  ThreadPool& pool_;
  std::vector<float> logits_, scores_;                           // [n][experts]
  std::vector<ExpertChoice> choices_;                            // [n][experts_used]
  std::vector<std::vector<std::pair<uint32_t, float>>> routed_;  // [expert]: (token, weight)
  std::vector<float> x_rows_, gate_, up_, y_;
  MatmulScratch scratch_;
  QuantizedActivations xq_;
  std::vector<ExpertPart> parts_;
  std::vector<QuantizedActivations> part_x_, part_hidden_;  // [part]: its tokens' rows of x; its hidden states
};

}  // namespace kvs
