// The mixture-of-experts FFN against its definition composed of single matrix products: for each token, the shared
// experts' SwiGLU plus each chosen expert's SwiGLU times its weight, added in expert-index order. With int8-activation
// weights (every ISA but scalar, whose reference reads fp32 activations and takes the one-expert-at-a-time path) the
// FFN runs every expert's gate and up in one pass of the pool and every down in another; each product is bitwise the
// one matmul gives for the token alone (batch invariance, tensor/matmul.h), so the result must be too.
#include "model/moe_ffn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "tensor/convert.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

// A [rows][cols] matrix of N(0, 1/cols) values in `type`, owning its bytes.
struct Matrix {
  std::vector<std::byte> bytes;
  WeightView view;
  Matrix(DType type, size_t rows, size_t cols, std::mt19937& rng) : view{.type = type, .rows = rows, .cols = cols} {
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
    bytes.resize(rows * view.row_bytes());
    std::vector<float> row(cols);
    for (size_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng);
      if (type == DType::kF32) {
        std::memcpy(&bytes[r * view.row_bytes()], row.data(), cols * sizeof(float));
      } else {
        quantize_row(type, row.data(), &bytes[r * view.row_bytes()], cols);
      }
    }
    view.data = bytes.data();
  }
};

// down(silu(gate x) * up x) for one token, from single matrix products.
std::vector<float> swiglu_of(const WeightView& gate, const WeightView& up, const WeightView& down,
                             std::span<const float> x, ThreadPool& pool) {
  std::vector<float> g(gate.rows), u(up.rows), y(down.rows);
  matmul(gate, x, 1, g, pool);
  matmul(up, x, 1, u, pool);
  swiglu(g, u);
  matmul(down, g, 1, y, pool);
  return y;
}

TEST(MoeFfn, GroupedExpertsEqualTheirDefinitionBitwise) {
  ModelConfig config;
  config.dim = 64;
  config.moe = {.num_experts = 8, .experts_used = 3, .shared_experts = 1, .expert_ffn_dim = 96};
  std::mt19937 rng(7);
  Matrix router(DType::kF32, 8, 64, rng);
  // Mixed int8-activation types: Q4_0 gates and ups, Q8_0 downs and shared experts.
  std::vector<Matrix> gates, ups, downs;
  for (size_t e = 0; e < 8; ++e) {
    gates.emplace_back(DType::kQ4_0, 96, 64, rng);
    ups.emplace_back(DType::kQ4_0, 96, 64, rng);
    downs.emplace_back(DType::kQ8_0, 64, 96, rng);
  }
  Matrix shared_gate(DType::kQ8_0, 96, 64, rng), shared_up(DType::kQ8_0, 96, 64, rng),
      shared_down(DType::kQ8_0, 64, 96, rng);
  MoeLayerWeights w;
  w.router = router.view;
  w.shared_gate = shared_gate.view;
  w.shared_up = shared_up.view;
  w.shared_down = shared_down.view;
  for (size_t e = 0; e < 8; ++e) {
    w.gate.push_back(gates[e].view);
    w.up.push_back(ups[e].view);
    w.down.push_back(downs[e].view);
  }

  constexpr size_t kTokens = 9;
  std::vector<float> x(kTokens * 64);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  // With the shared expert and without one (then the output starts from zeros, not from what the buffer held).
  for (size_t shared : {1, 0}) {
    config.moe.shared_experts = shared;
    if (shared == 0) w.shared_gate = w.shared_up = w.shared_down = WeightView{};
    for (size_t threads : {1, 2}) {
      ThreadPool pool(threads);
      MoeFfn ffn(config, pool);
      std::vector<float> out(kTokens * 64, NAN);
      ffn.run(w, x, kTokens, out);
      std::vector<ExpertChoice> choices(ffn.choices().begin(), ffn.choices().end());
      std::set<uint32_t> used;
      for (size_t t = 0; t < kTokens; ++t) {
        const std::span<const float> xt{&x[t * 64], 64};
        std::vector<float> want =
            shared > 0 ? swiglu_of(w.shared_gate, w.shared_up, w.shared_down, xt, pool) : std::vector<float>(64, 0.0f);
        std::vector<ExpertChoice> chosen(&choices[t * 3], &choices[t * 3] + 3);
        std::sort(chosen.begin(), chosen.end(), [](auto a, auto b) { return a.expert < b.expert; });
        for (const ExpertChoice& c : chosen) {
          used.insert(c.expert);
          const std::vector<float> y = swiglu_of(w.gate[c.expert], w.up[c.expert], w.down[c.expert], xt, pool);
          for (size_t j = 0; j < 64; ++j) want[j] += c.weight * y[j];
        }
        for (size_t j = 0; j < 64; ++j) ASSERT_EQ(out[t * 64 + j], want[j]) << "token " << t << " element " << j;
        // The token alone: the same routing and the same bits.
        std::vector<float> alone(64, NAN);
        ffn.run(w, xt, 1, alone);
        EXPECT_EQ(alone, std::vector<float>(&out[t * 64], &out[t * 64] + 64)) << "token " << t;
      }
      EXPECT_GE(used.size(), 5u) << "the tokens route to most experts, so most run over several tokens or none";
    }
  }
}

}  // namespace
}  // namespace kvs
