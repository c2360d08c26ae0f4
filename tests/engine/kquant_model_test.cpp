// A K-quant model as people download them: a synthetic file written with llama.cpp's Q4_K_M recipe (Q4_K, with
// Q6_K for the output and for attn_v / ffn_down of the layers that get more bits) through the engine, against its
// F32 twin (every tensor the dequantized values of the K-quant file, so both compute with the same weights).
//
// The difference is the engine's int8 activations (matmul.h, kInt8Blocks), as with Q8_0 weights: each activation
// is off by up to half a step of its 32-value block (step max |x| / 127, the max ~2.5 sigma of the block), an RMS
// error of ~0.6% of the activations' size per projection; 8 layers of 7 projections add such errors as a root sum
// of squares, ~4% of the residual stream, and the largest of 512 logits (spread ~1) moves by a few times that.
// Measured: up to 0.085 on AVX2 over the prompt (and the same, 0.077, for a Q8_0 file of this shape, so it is the
// activations' rounding, not the K-quant arithmetic, which the kernel tests bound on their own); the bound 0.25 is
// 3x that. The greedy tokens are the twin's up to the first position whose top two logits are within twice the
// bound (a near tie may go either way; after it the two runs are fed other tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "f32_twin.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "tensor/matmul.h"
#include "test_support.h"

namespace kvs {
namespace {

constexpr float kLogitBound = 0.25f;

SynthSpec q4_k_m_model() {
  return {.layers = 8,
          .dim = 256,
          .heads = 4,
          .kv_heads = 2,
          .ffn = 512,
          .vocab = 512,
          .ctx = 256,
          .type = DType::kQ4_K,
          .mixed_k = true};
}

TEST(KQuantModel, RecipeMixesTypesAsLlamaCppDoes) {
  test::TempDir dir("kquant_recipe");
  ASSERT_TRUE(write_synth_model(q4_k_m_model(), dir.file("m.gguf")));
  auto file = gguf::File::open(dir.file("m.gguf"));
  ASSERT_TRUE(file);
  const auto type_of = [&](const std::string& name) { return file->find_tensor(name)->type; };
  EXPECT_EQ(file->get_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(type_of("output.weight"), DType::kQ6_K);
  EXPECT_EQ(type_of("token_embd.weight"), DType::kQ4_K);
  // 8 layers: more bits for layer 0 (first eighth), 7 (last eighth) and 3, 6 ((i - 1) % 3 == 2).
  std::set<size_t> more_bits;
  for (size_t l = 0; l < 8; ++l) {
    const DType v = type_of(fmt::format("blk.{}.attn_v.weight", l));
    EXPECT_EQ(type_of(fmt::format("blk.{}.ffn_down.weight", l)), v) << l;
    EXPECT_EQ(type_of(fmt::format("blk.{}.attn_q.weight", l)), DType::kQ4_K) << l;
    if (v == DType::kQ6_K) more_bits.insert(l);
  }
  EXPECT_EQ(more_bits, (std::set<size_t>{0, 3, 6, 7}));
  // A width that is not whole super-blocks falls back as llama.cpp's quantizer does: Q4_K to Q5_0, Q6_K to Q8_0.
  SynthSpec narrow = q4_k_m_model();
  narrow.ffn = 288;
  ASSERT_TRUE(write_synth_model(narrow, dir.file("narrow.gguf")));
  auto n = gguf::File::open(dir.file("narrow.gguf"));
  ASSERT_TRUE(n);
  EXPECT_EQ(n->find_tensor("blk.1.ffn_down.weight")->type, DType::kQ5_0);  // rows of 288
  EXPECT_EQ(n->find_tensor("blk.0.ffn_down.weight")->type, DType::kQ8_0);  // more bits: Q6_K's fallback
  EXPECT_EQ(n->find_tensor("blk.1.ffn_up.weight")->type, DType::kQ4_K);    // rows of 256
}

TEST(KQuantModel, Q4KMEqualsItsF32TwinWithinTheActivationBound) {
  test::TempDir dir("kquant_twin");
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(write_synth_model(q4_k_m_model(), path));
  std::vector<TokenId> prompt{1};
  for (size_t i = 1; i < 20; ++i) prompt.push_back(static_cast<TokenId>(260 + (i * 37) % 250));
  const test::TwinComparison c = test::compare_with_f32_twin(path, prompt, 24, kLogitBound);
  if (matmul_activations(DType::kQ4_K, best_isa()) == MatmulActivations::kF32) {
    // The scalar reference (KVS_ISA=scalar) multiplies the dequantized rows by fp32 activations, as the twin does.
    EXPECT_EQ(c.worst, 0.0f);
    EXPECT_EQ(c.got, c.want);
  } else {
    EXPECT_LE(c.worst, kLogitBound);
    EXPECT_GT(c.worst, 0.0f) << "the K-quant path must have run, not the F32 one";
  }
  EXPECT_GE(c.agreed, 1u);
  EXPECT_GE(std::set<TokenId>(c.want.begin(), c.want.end()).size(), 4u);
}

// Files of the shapes users download (issue 40): Qwen2.5-0.5B's width 896 and Gemma 3 1B's 1152 are not whole
// 256-value super-blocks, so llama.cpp's Q4_K_M recipe writes their matrices in Q5_0 (Q4_K's fallback) and Q8_0
// (Q6_K's), the rows of 4864 and 6912 in the K-quants. Two layers and a vocabulary of 1,024 keep the test short;
// the row widths, head shapes and recipe are the models'. Each loads and runs against its F32 twin within the bound
// above (the same int8 activations over rows of other widths).
TEST(KQuantModel, Qwen25AndGemma3ShapedQ4KMFilesLoadAndRunAsTheirF32Twins) {
  for (const char* preset : {"qwen2.5-0.5b", "gemma3-1b"}) {
    test::TempDir dir(std::string("kquant_shape_") + preset);
    SynthSpec spec = *synth_preset(preset);
    spec.layers = 2;
    spec.vocab = 1024;
    spec.type = DType::kQ4_K;
    spec.mixed_k = true;
    const std::string path = dir.file("m.gguf");
    ASSERT_TRUE(write_synth_model(spec, path)) << preset;
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file);
    // Every layer matrix in a K-quant where its rows are whole super-blocks, else in a fallback type; both occur.
    size_t fallbacks = 0, k_quants = 0;
    for (const gguf::TensorInfo& t : file->tensors()) {
      if (t.name.rfind("blk.", 0) != 0 || t.dims.size() != 2) continue;
      const bool whole = t.dims[0] % 256 == 0;
      EXPECT_EQ(is_k_quant(t.type), whole)
          << preset << " " << t.name << " rows of " << t.dims[0] << ": " << dtype_name(t.type);
      if (!whole) {
        EXPECT_TRUE(t.type == DType::kQ5_0 || t.type == DType::kQ8_0) << t.name << ": " << dtype_name(t.type);
      }
      ++(whole ? k_quants : fallbacks);
    }
    EXPECT_GT(fallbacks, 0u) << preset;
    EXPECT_GT(k_quants, 0u) << preset;
    std::vector<TokenId> prompt{1};
    for (size_t i = 1; i < 16; ++i) prompt.push_back(static_cast<TokenId>(260 + (i * 37) % 700));
    const test::TwinComparison c = test::compare_with_f32_twin(path, prompt, 12, kLogitBound);
    // Measured: 0.048 (Qwen2.5 shape) and 0.062 (Gemma 3) on avx512 and avx2; 0 on scalar, which reads the
    // dequantized rows with fp32 activations as the twin does.
    EXPECT_LE(c.worst, matmul_activations(DType::kQ4_K, best_isa()) == MatmulActivations::kF32 ? 0.0f : kLogitBound)
        << preset;
    EXPECT_GE(c.agreed, 1u) << preset;
  }
}

}  // namespace
}  // namespace kvs
