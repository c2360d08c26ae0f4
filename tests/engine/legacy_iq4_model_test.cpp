// Models in the other types llama.cpp's quantizer writes (Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS: tensor/legacy_iq4_quant.h)
// through the engine, each against its F32 twin (f32_twin.h). On the SIMD ISAs they run on the packed int8 kernels,
// so they differ from the twin by the int8 activations only, bounded as for K-quants (kquant_model_test.cpp: 0.25
// on the logits); the scalar ISA multiplies dequantized rows by fp32 activations exactly as the twin does.
#include <gtest/gtest.h>

#include <set>

#include "f32_twin.h"
#include "model/synth.h"
#include "tensor/matmul.h"
#include "tensor/packed_weights.h"

namespace kvs {
namespace {

constexpr float kInt8ActivationBound = 0.25f;

class LegacyIq4Model : public ::testing::TestWithParam<DType> {};

TEST_P(LegacyIq4Model, EqualsItsF32TwinWithinTheBoundOfItsPath) {
  const DType type = GetParam();
  test::TempDir dir("legacy_iq4_model_" + std::string(dtype_name(type)));
  const std::string path = dir.file("m.gguf");
  const SynthSpec spec{
      .layers = 4, .dim = 256, .heads = 4, .kv_heads = 2, .ffn = 512, .vocab = 512, .ctx = 256, .type = type};
  ASSERT_TRUE(write_synth_model(spec, path));
  {
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file);
    EXPECT_EQ(file->find_tensor("blk.0.attn_q.weight")->type, type) << "the file holds the type under test";
  }
  std::vector<TokenId> prompt{1};
  for (size_t i = 1; i < 16; ++i) prompt.push_back(static_cast<TokenId>(260 + (i * 37) % 250));
  const bool int8_path = packed_layout_for(type).has_value();
  const float bound = kInt8ActivationBound;
  const test::TwinComparison c = test::compare_with_f32_twin(path, prompt, 24, bound);
  EXPECT_LE(c.worst, bound);
  if (int8_path) {
    EXPECT_GT(c.worst, 0.0f) << "the packed int8 kernels must have run, not the F32 ones";
  }
  if (best_isa() == Isa::kScalar) {
    EXPECT_EQ(c.worst, 0.0f) << "the scalar reference computes as the twin does";
  }
  EXPECT_GE(c.agreed, 1u) << "worst " << c.worst;
  EXPECT_GE(std::set<TokenId>(c.want.begin(), c.want.end()).size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(Types, LegacyIq4Model,
                         ::testing::Values(DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kIQ4_XS),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kvs
