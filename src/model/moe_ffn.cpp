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

bool MoeFfn::int8_activations(const MoeLayerWeights& w) {
  const auto int8 = [](const WeightView& v) {
    return v.rows == 0 || matmul_activations(v.type, best_isa()) == MatmulActivations::kInt8Blocks;
  };
  for (size_t e = 0; e < w.gate.size(); ++e) {
    if (!int8(w.gate[e]) || !int8(w.up[e]) || !int8(w.down[e])) return false;
  }
  return int8(w.shared_gate) && int8(w.shared_up) && int8(w.shared_down);
}

void MoeFfn::run_grouped(const MoeLayerWeights& w, std::span<const float> x, size_t n, std::span<float> out) {
  const size_t dim = config_.dim, experts = config_.moe.num_experts;
  parts_.clear();
  size_t hidden = 0;
  if (config_.moe.shared_experts > 0) {
    parts_.push_back({&w.shared_gate, &w.shared_up, &w.shared_down, experts, n, hidden});
    hidden += n * w.shared_gate.rows;
  }
  size_t routed_rows = 0;
  for (size_t e = 0; e < experts; ++e) {
    if (routed_[e].empty()) continue;
    parts_.push_back({&w.gate[e], &w.up[e], &w.down[e], e, routed_[e].size(), hidden});
    hidden += routed_[e].size() * w.gate[e].rows;
    routed_rows += routed_[e].size();
  }
  gate_.resize(hidden);
  up_.resize(hidden);
  y_.resize(routed_rows * dim);
  if (part_x_.size() < parts_.size()) part_x_.resize(parts_.size());
  if (part_hidden_.size() < parts_.size()) part_hidden_.resize(parts_.size());

  // x quantized once; each expert's tokens' rows copied out of it (quantization is per token).
  quantize_activations(x.first(n * dim), n, dim, xq_, pool_);
  std::vector<QuantizedMatmul> items;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const ExpertPart& p = parts_[i];
    const QuantizedActivations* xq = &xq_;
    if (p.expert < experts) {
      part_x_[i].reshape(p.m, dim);
      for (size_t j = 0; j < p.m; ++j) copy_quantized_token(xq_, routed_[p.expert][j].first, part_x_[i], j);
      xq = &part_x_[i];
    }
    const size_t f = p.gate->rows;
    items.push_back({p.gate, {&gate_[p.offset], p.m * f}, xq});
    items.push_back({p.up, {&up_[p.offset], p.m * f}, xq});
  }
  matmul_quantized_group(items, pool_);
  swiglu(gate_, up_);

  items.clear();
  size_t y_row = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const ExpertPart& p = parts_[i];
    const size_t f = p.gate->rows;
    quantize_activations({&gate_[p.offset], p.m * f}, p.m, f, part_hidden_[i], pool_);
    // The shared experts write out, each expert its rows of y_.
    const std::span<float> y = p.expert < experts ? std::span<float>(&y_[y_row * dim], p.m * dim) : out.first(n * dim);
    if (p.expert < experts) y_row += p.m;
    items.push_back({p.down, y, &part_hidden_[i]});
  }
  matmul_quantized_group(items, pool_);
  if (config_.moe.shared_experts == 0) std::fill_n(out.begin(), n * dim, 0.0f);

  // Each expert's outputs times their weights, added in expert-index order as the one-at-a-time path does.
  y_row = 0;
  for (const ExpertPart& p : parts_) {
    if (p.expert == experts) continue;
    for (size_t i = 0; i < p.m; ++i, ++y_row) {
      const auto [token, weight] = routed_[p.expert][i];
      float* o = &out[token * dim];
      for (size_t j = 0; j < dim; ++j) o[j] += weight * y_[y_row * dim + j];
    }
  }
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
  if (int8_activations(w)) return run_grouped(w, x, n, out);
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
