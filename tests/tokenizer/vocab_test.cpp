// Vocabulary validation, from plain data and from GGUF metadata written by gguf::Writer.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/toy_vocab.h"
#include "tokenizer/vocab_gguf.h"

namespace kvs {
namespace {

void expect_error(const Status& status, ErrorCode code, const std::string& message_part) {
  EXPECT_FALSE(status.is_ok());
  EXPECT_EQ(status.code(), code) << status.message();
  EXPECT_NE(status.message().find(message_part), std::string::npos)
      << "message: " << status.message() << "\nexpected to contain: " << message_part;
}

TEST(VocabValidate, AcceptsToyVocabularies) {
  EXPECT_TRUE(testing::make_toy_spm_vocab().validate().is_ok());
  EXPECT_TRUE(testing::make_toy_bpe_vocab({"a b"}).validate().is_ok());
}

TEST(VocabValidate, NamesKeysAndNumbers) {
  Vocab vocab = testing::make_toy_spm_vocab();
  vocab.scores.pop_back();
  expect_error(vocab.validate(), ErrorCode::kCorrupt,
               "tokenizer.ggml.scores has 269 entries but tokenizer.ggml.tokens has 270");

  vocab = testing::make_toy_spm_vocab();
  vocab.types.resize(3);
  expect_error(vocab.validate(), ErrorCode::kCorrupt,
               "tokenizer.ggml.token_type has 3 entries but tokenizer.ggml.tokens has 270");

  vocab = testing::make_toy_spm_vocab();
  vocab.types[7] = static_cast<TokenType>(9);
  expect_error(vocab.validate(), ErrorCode::kCorrupt, "tokenizer.ggml.token_type[7] = 9 is not a token type (0..6)");

  vocab = testing::make_toy_spm_vocab();
  vocab.bos = 270;
  expect_error(vocab.validate(), ErrorCode::kOutOfRange,
               "tokenizer.ggml.bos_token_id = 270 is outside the vocabulary of 270 tokens");
  vocab.bos = 1;
  vocab.eos = -2;
  expect_error(vocab.validate(), ErrorCode::kOutOfRange, "tokenizer.ggml.eos_token_id = -2");

  vocab = Vocab{};
  expect_error(vocab.validate(), ErrorCode::kCorrupt, "tokenizer.ggml.tokens is empty");

  Vocab bpe = testing::make_toy_bpe_vocab({"a b", "ab"});
  expect_error(bpe.validate(), ErrorCode::kCorrupt, "tokenizer.ggml.merges[1] = 'ab' is not two parts");
  bpe.merges.clear();
  expect_error(bpe.validate(), ErrorCode::kCorrupt, "tokenizer.ggml.merges is empty");
}

TEST(VocabValidate, FromVocabRejectsInvalidData) {
  Vocab vocab = testing::make_toy_spm_vocab();
  vocab.unknown = 5000;
  auto tokenizer = Tokenizer::from_vocab(std::move(vocab));
  ASSERT_FALSE(tokenizer.has_value());
  expect_error(tokenizer.status(), ErrorCode::kOutOfRange, "tokenizer.ggml.unknown_token_id = 5000");
}

TEST(PreTokenizerNames, KnownAndUnknown) {
  EXPECT_EQ(*pre_tokenizer_from_name("gpt-2"), PreTokenizerKind::kGpt2);
  EXPECT_EQ(*pre_tokenizer_from_name(""), PreTokenizerKind::kGpt2);
  EXPECT_EQ(*pre_tokenizer_from_name("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*pre_tokenizer_from_name("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(*pre_tokenizer_from_name("deepseek-llm"), PreTokenizerKind::kDeepseekLlm);
  auto unknown = pre_tokenizer_from_name("tekken");
  ASSERT_FALSE(unknown.has_value());
  expect_error(unknown.status(), ErrorCode::kUnimplemented, "tokenizer.ggml.pre 'tekken' is not supported");
}

// Writes a small SentencePiece vocabulary to GGUF; `edit` changes the metadata before writing.
class GgufVocabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".gguf"))
                .string();
    fill(writer_, "");
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // The base metadata, less `skip_key` (the writer has no erase; tests that drop a key refill).
  static void fill(gguf::Writer& writer, std::string_view skip_key) {
    gguf::Writer all;
    all.set_string("general.architecture", "llama");
    all.set_string("tokenizer.ggml.model", "llama");
    all.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\u2581a", "a"});
    all.set_f32_array("tokenizer.ggml.scores", std::vector<float>{0, 0, 0, -1, -2});
    all.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>{2, 3, 3, 1, 1});
    all.set_u32("tokenizer.ggml.bos_token_id", 1);
    all.set_u32("tokenizer.ggml.eos_token_id", 2);
    all.set_u32("tokenizer.ggml.unknown_token_id", 0);
    all.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // none, as llama.cpp writes it
    if (skip_key.empty()) {
      writer = std::move(all);
      return;
    }
    // Named after the test: ctest runs tests as processes side by side, and two removing one shared file raced
    // (a write that failed, then std::get on what was read back).
    const std::string path =
        (std::filesystem::path(::testing::TempDir()) /
         (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_base.gguf"))
            .string();
    ASSERT_TRUE(all.write(path).is_ok());
    auto file = gguf::File::open(path);
    ASSERT_TRUE(file.has_value()) << file.status().message();
    writer = gguf::Writer();
    for (const auto& [key, value] : file->metadata()) {
      if (key != skip_key) writer.set(key, value);
    }
    std::filesystem::remove(path);
  }
  Expected<Vocab> load() {
    const Status written = writer_.write(path_);
    EXPECT_TRUE(written.is_ok()) << written.message();
    auto file = gguf::File::open(path_);
    EXPECT_TRUE(file.has_value()) << file.status().message();
    if (!file) return file.status();
    return vocab_from_gguf(*file);
  }
  void remove_key(std::string_view key) { fill(writer_, key); }

  std::string path_;
  gguf::Writer writer_;
};

TEST_F(GgufVocabTest, ReadsAllFields) {
  writer_.set_bool("tokenizer.ggml.add_bos_token", false);
  auto vocab = load();
  ASSERT_TRUE(vocab.has_value()) << vocab.status().message();
  EXPECT_EQ(vocab->kind, VocabKind::kSentencePiece);
  EXPECT_EQ(vocab->size(), 5u);
  EXPECT_EQ(vocab->tokens[3], "\u2581a");
  EXPECT_EQ(vocab->scores[4], -2.0f);
  EXPECT_EQ(vocab->types[1], TokenType::kControl);
  EXPECT_EQ(vocab->bos, 1);
  EXPECT_EQ(vocab->eos, 2);
  EXPECT_EQ(vocab->unknown, 0);
  EXPECT_EQ(vocab->padding, -1);
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_TRUE(vocab->add_space_prefix);
  auto tokenizer = Tokenizer::from_vocab(std::move(*vocab));
  ASSERT_TRUE(tokenizer.has_value());
  EXPECT_EQ(tokenizer->encode("a a", false), (std::vector<TokenId>{3, 3}));
  EXPECT_FALSE(tokenizer->add_bos_by_default());
}

TEST_F(GgufVocabTest, MissingKeys) {
  remove_key("tokenizer.ggml.model");
  expect_error(load().status(), ErrorCode::kNotFound, "tokenizer.ggml.model is missing");
}

TEST_F(GgufVocabTest, MissingScoresForLlama) {
  remove_key("tokenizer.ggml.scores");
  expect_error(load().status(), ErrorCode::kNotFound, "tokenizer.ggml.scores is missing");
}

TEST_F(GgufVocabTest, MissingMergesForGpt2) {
  writer_.set_string("tokenizer.ggml.model", "gpt2");
  expect_error(load().status(), ErrorCode::kNotFound, "tokenizer.ggml.merges is missing");
}

TEST_F(GgufVocabTest, UnsupportedModel) {
  writer_.set_string("tokenizer.ggml.model", "bert");
  expect_error(load().status(), ErrorCode::kUnimplemented, "tokenizer.ggml.model 'bert' is not supported");
}

TEST_F(GgufVocabTest, WrongTypes) {
  writer_.set_i32_array("tokenizer.ggml.scores", std::vector<int32_t>{0, 0, 0, 1, 2});
  expect_error(load().status(), ErrorCode::kCorrupt,
               "tokenizer.ggml.scores must be an array of float32, got an array of int32");
  writer_.set_f32_array("tokenizer.ggml.scores", std::vector<float>{0, 0, 0, -1, -2});
  writer_.set_string("tokenizer.ggml.tokens", "a");
  expect_error(load().status(), ErrorCode::kCorrupt, "tokenizer.ggml.tokens must be an array of string, got a string");
}

TEST_F(GgufVocabTest, LengthMismatch) {
  writer_.set_f32_array("tokenizer.ggml.scores", std::vector<float>{0, 0, 0});
  expect_error(load().status(), ErrorCode::kCorrupt,
               "tokenizer.ggml.scores has 3 entries but tokenizer.ggml.tokens has 5");
}

TEST_F(GgufVocabTest, BadTokenType) {
  writer_.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>{2, 3, 3, 1, 12});
  expect_error(load().status(), ErrorCode::kCorrupt, "tokenizer.ggml.token_type[4] = 12 is not a token type");
}

TEST_F(GgufVocabTest, IdOutOfRange) {
  writer_.set_u32("tokenizer.ggml.eos_token_id", 5);
  expect_error(load().status(), ErrorCode::kOutOfRange,
               "tokenizer.ggml.eos_token_id = 5 is outside the vocabulary of 5 tokens");
}

TEST_F(GgufVocabTest, UnknownPreTokenizer) {
  writer_.set_string("tokenizer.ggml.model", "gpt2");
  writer_.set_string("tokenizer.ggml.pre", "mystery");
  writer_.set_string_array("tokenizer.ggml.merges", {"a b"});
  expect_error(load().status(), ErrorCode::kUnimplemented, "tokenizer.ggml.pre 'mystery' is not supported");
}

}  // namespace
}  // namespace kvs
