// Golden tokenizations: llama.cpp's test-tokenizer-0 strings and ids for real vocabularies read
// from GGUF, the stories260K prompts, and the perplexity protocol's token count.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "tokenizer/test_data.h"
#include "tokenizer/tokenizer.h"

namespace kvs {
namespace {

using testing::read_expected_ids;
using testing::read_file;
using testing::read_test_strings;
using testing::shared_path;

Tokenizer load(const std::string& relative) {
  auto file = gguf::File::open(shared_path(relative));
  EXPECT_TRUE(file.has_value()) << file.status().message();
  auto tokenizer = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

struct GoldenCase {
  const char* name;
  const char* vocab;   // GGUF holding tokenizer.ggml.*
  const char* prefix;  // .inp / .out beside it
};

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenTest, EncodesLikeLlamaCpp) {
  const Tokenizer tokenizer = load(GetParam().vocab);
  const auto strings = read_test_strings(shared_path(std::string(GetParam().prefix) + ".inp"));
  const auto expected = read_expected_ids(shared_path(std::string(GetParam().prefix) + ".out"));
  ASSERT_EQ(strings.size(), 46u);
  ASSERT_EQ(expected.size(), strings.size());
  size_t passed = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::vector<TokenId> ids = tokenizer.encode(strings[i], /*add_bos=*/false);
    EXPECT_EQ(ids, expected[i]) << "string " << i << ": '" << strings[i] << "'";
    passed += ids == expected[i];
  }
  std::printf("[ %s ] %zu of %zu strings encode as llama.cpp does\n", GetParam().name, passed, strings.size());
}

TEST_P(GoldenTest, DecodeInvertsEncode) {
  const Tokenizer tokenizer = load(GetParam().vocab);
  for (const std::string& s : read_test_strings(shared_path(std::string(GetParam().prefix) + ".inp"))) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(s, false)), s);
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(s, true)), s) << "BOS renders as nothing";
  }
}

TEST_P(GoldenTest, StreamingDecoderMatchesDecode) {
  const Tokenizer tokenizer = load(GetParam().vocab);
  for (const std::string& s : read_test_strings(shared_path(std::string(GetParam().prefix) + ".inp"))) {
    const std::vector<TokenId> ids = tokenizer.encode(s, true);
    StreamingDecoder decoder(tokenizer);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string piece = decoder.push(id);
      EXPECT_EQ(utf8::sanitize(piece), piece) << "pieces are whole UTF-8 characters";
      streamed += piece;
    }
    streamed += decoder.finish();
    EXPECT_EQ(streamed, s);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GoldenTest,
                         ::testing::Values(GoldenCase{"stories260K", "models/stories260K/stories260K.gguf",
                                                      "reference/stories260K/tok512.llama-cpp-tests"},
                                           GoldenCase{"llama_spm",
                                                      "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf",
                                                      "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"},
                                           GoldenCase{"gpt2", "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf",
                                                      "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf"}),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) { return std::string(info.param.name); });

TEST(Stories260K, PromptIdsMatchReference) {
  const Tokenizer tokenizer = load("models/stories260K/stories260K.gguf");
  EXPECT_TRUE(tokenizer.add_bos_by_default());
  EXPECT_EQ(tokenizer.bos(), 1);
  EXPECT_EQ(tokenizer.eos(), 2);
  std::ifstream in(shared_path("reference/stories260K/greedy.jsonl"));
  size_t prompts = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    const auto prompt = record.at("prompt").get<std::string>();
    const auto expected = record.at("prompt_ids").get<std::vector<TokenId>>();
    EXPECT_EQ(tokenizer.encode(prompt, tokenizer.add_bos_by_default()), expected) << prompt;
    EXPECT_EQ(tokenizer.decode(expected), prompt);
    ++prompts;
  }
  EXPECT_GT(prompts, 0u);
}

TEST(Stories260K, EvalTextTokenCountMatchesPerplexityProtocol) {
  const Tokenizer tokenizer = load("models/stories260K/stories260K.gguf");
  const std::string text = read_file(shared_path("eval/tinystories_valid_head.txt")).substr(0, 60000);
  const auto protocol = nlohmann::json::parse(read_file(shared_path("reference/stories260K/perplexity.json")));
  const std::vector<TokenId> ids = tokenizer.encode(text, /*add_bos=*/false);
  EXPECT_EQ(ids.size(), protocol.at("L256_16chunks").at("n_text_tokens").get<size_t>());
  EXPECT_EQ(tokenizer.decode(ids), text);
}

TEST(LlamaSpm, SpecialTokensAreTextUnlessParsed) {
  const Tokenizer tokenizer = load("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const std::vector<TokenId> plain = tokenizer.encode("<s>Hi</s>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(tokenizer.decode(plain), "<s>Hi</s>");
  const std::vector<TokenId> parsed = tokenizer.encode("<s>Hi</s>", false, /*parse_special=*/true);
  const std::vector<TokenId> hi = tokenizer.encode("Hi", false);  // "▁Hi": dummy prefix after <s>
  std::vector<TokenId> expected = {1};
  expected.insert(expected.end(), hi.begin(), hi.end());
  expected.push_back(2);
  EXPECT_EQ(parsed, expected);
  EXPECT_TRUE(tokenizer.is_end_of_generation(2));
  EXPECT_FALSE(tokenizer.is_end_of_generation(1));
}

TEST(Gpt2, EndOfTextIsSpecialOnlyWhenParsed) {
  const Tokenizer tokenizer = load("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_FALSE(tokenizer.add_bos_by_default());
  EXPECT_EQ(tokenizer.vocab_size(), 50257u);
  EXPECT_EQ(tokenizer.encode("a<|endoftext|>b", false, true), (std::vector<TokenId>{64, 50256, 65}));
  const std::vector<TokenId> plain = tokenizer.encode("<|endoftext|>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(tokenizer.decode(plain), "<|endoftext|>");
  EXPECT_EQ(tokenizer.decode(std::vector<TokenId>{64, 50256, 65}), "ab");
  EXPECT_TRUE(tokenizer.is_end_of_generation(50256));
}

}  // namespace
}  // namespace kvs
