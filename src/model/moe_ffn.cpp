#include "model/moe_ffn.h"

#include <algorithm>

#include "model/projection.h"
#include "tensor/ops.h"

namespace kvs {

void MoeFfn::swiglu_expert(const WeightView& gate, const WeightView& up, const WeightView& down,
                           std::span<const float> x, size_t m, std::span<float> y) {
  const size_t f = gate.rows;
  gate_.resize(m * f);
  up_.resize(m * f);
  project(x, m, {{&gate, gate_.data()}, {&up, up_.data()}}, pool_, xq_, scratch_);
  swiglu(gate_, up_);
  matmul(down, gate_, m, y.first(m * config_.dim), pool_, scratch_);
}

void MoeFfn::run(const MoeLayerWeights& w, std::span<const float> x, size_t n, std::span<float> out) {
  const MoeConfig& moe = config_.moe;
  const size_t dim = config_.dim, experts = moe.num_experts, k = moe.experts_used;
  logits_.resize(n * experts);
  scores_.resize(n * experts);
  choices_.resize(n * k);
  matmul(w.router, x.first(n * dim), n, logits_, pool_, scratch_);
  routed_.assign(experts, {});
  for (size_t t = 0; t < n; ++t) {
    const std::span<ExpertChoice> chosen{&choices_[t * k], k};
    route_token({&logits_[t * experts], experts}, moe, {&scores_[t * experts], experts}, chosen);
    for (const ExpertChoice& c : chosen) routed_[c.expert].emplace_back(static_cast<uint32_t>(t), c.weight);
  }
  if (moe.shared_experts > 0) {
    swiglu_expert(w.shared_gate, w.shared_up, w.shared_down, x, n, out);
  } else {
    std::fill_n(out.begin(), n * dim, 0.0f);
  }
  for (size_t e = 0; e < experts; ++e) {
    const auto& tokens = routed_[e];
    if (tokens.empty()) continue;
    const size_t m = tokens.size();
    x_rows_.resize(m * dim);
    y_.resize(m * dim);
    for (size_t i = 0; i < m; ++i) std::copy_n(&x[tokens[i].first * dim], dim, &x_rows_[i * dim]);
    swiglu_expert(w.gate[e], w.up[e], w.down[e], x_rows_, m, y_);
    for (size_t i = 0; i < m; ++i) {
      float* o = &out[tokens[i].first * dim];
      const float weight = tokens[i].second;
      for (size_t j = 0; j < dim; ++j) o[j] += weight * y_[i * dim + j];
    }
  }
}

}  // namespace kvs
