// Byte-level BPE loaded from Hugging Face files: Qwen2 (checked against llama.cpp's ids for the
// same strings) and GPT-2 (which must agree with the GGUF vocabulary).
#include <gtest/gtest.h>

#include "tokenizer/test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_hf.h"

namespace kvs {
namespace {

using testing::read_expected_ids;
using testing::read_test_strings;
using testing::shared_path;

Tokenizer load_hf(const std::string& dir, bool with_config, PreTokenizerKind pre) {
  const HfTokenizerFiles files{.vocab_json = shared_path(dir + "/vocab.json"),
                               .merges_txt = shared_path(dir + "/merges.txt"),
                               .tokenizer_config_json = with_config ? shared_path(dir + "/tokenizer_config.json") : ""};
  auto vocab = vocab_from_hf_files(files, pre);
  EXPECT_TRUE(vocab.has_value()) << vocab.status().message();
  auto tokenizer = Tokenizer::from_vocab(std::move(vocab).value());
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

void expect_golden(const Tokenizer& tokenizer, const std::string& name, const std::string& prefix) {
  const auto strings = read_test_strings(shared_path(prefix + ".inp"));
  const auto expected = read_expected_ids(shared_path(prefix + ".out"));
  ASSERT_EQ(strings.size(), 46u);
  ASSERT_EQ(expected.size(), strings.size());
  size_t passed = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::vector<TokenId> ids = tokenizer.encode(strings[i], false);
    EXPECT_EQ(ids, expected[i]) << "string " << i << ": '" << strings[i] << "'";
    EXPECT_EQ(tokenizer.decode(ids), strings[i]);
    passed += ids == expected[i];
  }
  std::printf("[ %s ] %zu of %zu strings encode as llama.cpp does\n", name.c_str(), passed, strings.size());
}

// Loaded once: parsing the 151k-token vocab.json and merges takes most of a second.
const Tokenizer& qwen2() {
  static const Tokenizer tokenizer = load_hf("tokenizers/qwen2", true, PreTokenizerKind::kQwen2);
  return tokenizer;
}

TEST(HfVocab, Qwen2MatchesLlamaCpp) {
  expect_golden(qwen2(), "qwen2 (vocab.json)", "tokenizers/llama.cpp-vocab/ggml-vocab-qwen2.gguf");
}

TEST(HfVocab, Qwen2SpecialTokens) {
  const Tokenizer& tokenizer = qwen2();
  EXPECT_EQ(tokenizer.vocab_size(), 151646u);
  EXPECT_EQ(tokenizer.bos(), -1);
  EXPECT_EQ(tokenizer.eos(), 151645);  // <|im_end|>
  EXPECT_FALSE(tokenizer.add_bos_by_default());
  EXPECT_TRUE(tokenizer.is_end_of_generation(151643)) << "<|endoftext|>";
  EXPECT_TRUE(tokenizer.is_end_of_generation(151645));
  const std::vector<TokenId> ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>", true, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_EQ(tokenizer.decode(ids), "user\nhi");
}

TEST(HfVocab, Gpt2FilesAgreeWithGguf) {
  const Tokenizer tokenizer = load_hf("tokenizers/gpt2", false, PreTokenizerKind::kGpt2);
  expect_golden(tokenizer, "gpt2 (vocab.json)", "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
}

TEST(HfVocab, MissingFileNamesThePath) {
  const HfTokenizerFiles files{
      .vocab_json = "/nonexistent/vocab.json", .merges_txt = "/nonexistent/merges.txt", .tokenizer_config_json = ""};
  auto vocab = vocab_from_hf_files(files, PreTokenizerKind::kGpt2);
  ASSERT_FALSE(vocab.has_value());
  EXPECT_EQ(vocab.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(vocab.status().message().find("/nonexistent/vocab.json"), std::string::npos);
}

}  // namespace
}  // namespace kvs
