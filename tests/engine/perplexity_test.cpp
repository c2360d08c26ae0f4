// kvserve perplexity reproduces both references of ../shared/reference/stories260K/perplexity.json.
#include <gtest/gtest.h>

#include "engine/perplexity.h"
#include "test_support.h"

namespace kvs {
namespace {

TEST(Perplexity, ReproducesReferenceForBothChunkLengths) {
  const auto reference = nlohmann::json::parse(test::read_file(test::shared_path("reference/stories260K/perplexity.json")));
  auto model = LlamaModel::load(test::default_model_path());
  ASSERT_TRUE(model) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  ThreadPool pool(2);
  const std::string text = test::read_file(test::shared_path("eval/tinystories_valid_head.txt")).substr(0, 60000);
  for (const char* key : {"L256_16chunks", "L512_8chunks"}) {
    const auto& ref = reference[key];
    const PerplexityOptions options{.chunk_tokens = ref["chunk_len"], .max_chunks = ref["chunks"].size()};
    auto result = evaluate_perplexity(**model, *tokenizer, pool, text, options);
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

TEST(Perplexity, RejectsChunkLongerThanContext) {
  auto model = LlamaModel::load(test::default_model_path());
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
