// kvserve perplexity reproduces both references of ../shared/reference/stories260K/perplexity.json.
#include "eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/decoder_model.h"
#include "test_support.h"

namespace kvs {
namespace {

// The default model, its tokenizer and the first 60000 bytes of the eval text (the references' slice).
struct EvalSetup {
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ThreadPool pool{2};
  std::string text = test::read_file(test::shared_path("eval/tinystories_valid_head.txt")).substr(0, 60000);

  EvalSetup() {
    auto m = DecoderModel::load(test::default_model_path());
    EXPECT_TRUE(m) << m.status().message();
    if (!m) return;
    model = std::move(m).value();
    auto t = Tokenizer::from_gguf(model->file());
    EXPECT_TRUE(t) << t.status().message();
    if (t) tokenizer = std::make_unique<Tokenizer>(std::move(t).value());
  }
  Expected<PerplexityResult> evaluate(const PerplexityOptions& options) {
    return evaluate_perplexity(*model, *tokenizer, pool, text, options);
  }
};

TEST(Perplexity, ReproducesReferenceForBothChunkLengths) {
  const auto reference =
      nlohmann::json::parse(test::read_file(test::shared_path("reference/stories260K/perplexity.json")));
  EvalSetup setup;
  ASSERT_TRUE(setup.model && setup.tokenizer);
  for (const char* key : {"L256_16chunks", "L512_8chunks"}) {
    const auto& ref = reference[key];
    const PerplexityOptions options{.chunk_tokens = ref["chunk_len"], .max_chunks = ref["chunks"].size()};
    auto result = setup.evaluate(options);
    ASSERT_TRUE(result) << result.status().message();
    EXPECT_EQ(result->text_tokens, ref["n_text_tokens"].get<size_t>()) << key;
    ASSERT_EQ(result->chunk_mean_nll.size(), ref["chunks"].size());
    for (size_t c = 0; c < ref["chunks"].size(); ++c) {
      EXPECT_NEAR(result->chunk_mean_nll[c], ref["chunks"][c]["mean_nll"].get<double>(), 1e-4) << key << " chunk " << c;
    }
    const double want = ref["perplexity"];
    EXPECT_NEAR(result->perplexity, want, 1e-3 * want) << key;
  }
}

// What a 16-bit KV cache costs in quality, on the reference protocol (8 chunks of 512 tokens). Over the whole
// file (767 chunks) it measured f32 5.320017, f16 5.319960, bf16 5.320809; here 3.941287, 3.941289, 3.941349.
TEST(Perplexity, HalfPrecisionKvCostsLittle) {
  EvalSetup setup;
  ASSERT_TRUE(setup.model && setup.tokenizer);
  double perplexity[3] = {};
  const KvDType types[3] = {KvDType::kF32, KvDType::kF16, KvDType::kBF16};
  for (size_t i = 0; i < 3; ++i) {
    auto result = setup.evaluate({.chunk_tokens = 512, .max_chunks = 8, .kv = {.dtype = types[i]}});
    ASSERT_TRUE(result) << result.status().message();
    perplexity[i] = result->perplexity;
  }
  EXPECT_NE(perplexity[1], perplexity[0]) << "f16 K/V were not rounded";
  // The bound is each format's unit roundoff u (2^-11 for f16's 11-bit significand, 2^-8 for bf16's 8):
  // storing every K and V element with a relative error of at most u must move perplexity by less than
  // u relative. The rounding errors are unbiased and average out over 4096 scored tokens, so the
  // measured ratios sit one to two orders below u (f16: 1.2e-5 on AVX2, under 1e-5 on AVX-512 and
  // scalar, whose fp32 sums are ordered differently); a bias in the rounding would not.
  const double f16_unit_roundoff = std::ldexp(1.0, -11), bf16_unit_roundoff = std::ldexp(1.0, -8);
  EXPECT_NEAR(perplexity[1] / perplexity[0], 1.0, f16_unit_roundoff) << perplexity[1] << " vs " << perplexity[0];
  EXPECT_NEAR(perplexity[2] / perplexity[0], 1.0, bf16_unit_roundoff) << perplexity[2] << " vs " << perplexity[0];
}

TEST(Perplexity, RejectsChunkLongerThanContext) {
  auto model = DecoderModel::load(test::default_model_path());
  ASSERT_TRUE(model) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  ASSERT_TRUE(tokenizer);
  ThreadPool pool(1);
  auto result = evaluate_perplexity(**model, *tokenizer, pool, "Once upon a time",
                                    {.chunk_tokens = (*model)->config().context_length + 1});
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("chunk length"), std::string::npos) << result.status().message();
}

}  // namespace
}  // namespace kvs
