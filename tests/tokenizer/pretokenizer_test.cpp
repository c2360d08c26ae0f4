#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

using Words = std::vector<std::string_view>;

TEST(Gpt2PreTokenizer, SplitsLikeTheRegex) {
  EXPECT_EQ(split_gpt2(""), Words{});
  EXPECT_EQ(split_gpt2("Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split_gpt2("I've 33 cats!!"), (Words{"I", "'ve", " 33", " cats", "!!"}));
  EXPECT_EQ(split_gpt2("'RE 'll"), (Words{"'", "RE", " '", "ll"})) << "contractions are case-sensitive";
  EXPECT_EQ(split_gpt2("   Hello"), (Words{"  ", " Hello"})) << "\\s+(?!\\S) leaves the last space";
  EXPECT_EQ(split_gpt2("a  \n b"), (Words{"a", "  \n", " b"}));
  EXPECT_EQ(split_gpt2("hi  "), (Words{"hi", "  "})) << "trailing whitespace is one word";
  EXPECT_EQ(split_gpt2("a\tb"), (Words{"a", "\t", "b"})) << "single whitespace before a word: \\s+";
  EXPECT_EQ(split_gpt2("x3.5y"), (Words{"x", "3", ".", "5", "y"}));
  EXPECT_EQ(split_gpt2("\xD0\xBD\xD0\xB0 \xE4\xB8\xAD\xE6\x96\x87"),
            (Words{"\xD0\xBD\xD0\xB0", " \xE4\xB8\xAD\xE6\x96\x87"}));  // Cyrillic, CJK
  EXPECT_EQ(split_gpt2(" \xF0\x9F\x9A\x80 (x)"), (Words{" \xF0\x9F\x9A\x80", " (", "x", ")"}));
  // Khmer vowel signs are marks, not letters: they split a Khmer word.
  EXPECT_EQ(split_gpt2("\xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93"),
            (Words{"\xE1\x9E\x80", "\xE1\x9E\xB6", "\xE1\x9E\x93"}));
}

TEST(Gpt2PreTokenizer, IllFormedBytesAreOtherCharacters) {
  EXPECT_EQ(split_gpt2("a\xFF\xFE b"), (Words{"a", "\xFF\xFE", " b"}));
}

TEST(Llama3PreTokenizer, SplitsLikeTheRegex) {
  EXPECT_EQ(split_llama3("I'VE 12345 cats", 3), (Words{"I", "'VE", " ", "123", "45", " cats"}));
  EXPECT_EQ(split_llama3("I'VE 12345 cats", 1), (Words{"I", "'VE", " ", "1", "2", "3", "4", "5", " cats"}));
  EXPECT_EQ(split_llama3("(normal) x", 3), (Words{"(normal", ")", " x"})) << "one non-letter joins a word";
  EXPECT_EQ(split_llama3("\tHello", 3), (Words{"\tHello"}));
  EXPECT_EQ(split_llama3("hello\n\nworld", 3), (Words{"hello", "\n\n", "world"}));
  EXPECT_EQ(split_llama3("x  \n\n  y", 3), (Words{"x", "  \n\n", " ", " y"}));
  EXPECT_EQ(split_llama3("!!!\n\nabc", 3), (Words{"!!!\n\n", "abc"}));
  EXPECT_EQ(split_llama3(" ?!\r\n", 3), (Words{" ?!\r\n"}));
  EXPECT_EQ(split_llama3("a   ", 3), (Words{"a", "   "}));
}

TEST(DeepseekLlmPreTokenizer, SplitsInSequence) {
  EXPECT_EQ(split_deepseek_llm(""), Words{});
  EXPECT_EQ(split_deepseek_llm("Hello world"), (Words{"Hello", " world"}));
  // Letters split first ("'" and " 33" are gaps), then punctuation, then digits out of " 33".
  EXPECT_EQ(split_deepseek_llm("I've 33 cats!!"), (Words{"I", "'", "ve", " ", "33", " cats", "!!"}));
  EXPECT_EQ(split_deepseek_llm("12345"), (Words{"12345"})) << "no digit limit";
  EXPECT_EQ(split_deepseek_llm("a\n\nb"), (Words{"a", "\n", "\n", "b"})) << "each newline alone";
  EXPECT_EQ(split_deepseek_llm("a  b"), (Words{"a", " ", " b"})) << "\\s? takes one space";
  EXPECT_EQ(split_deepseek_llm("\tHi"), (Words{"\tHi"}));
  EXPECT_EQ(split_deepseek_llm("x ."), (Words{"x", " ."}));
  EXPECT_EQ(split_deepseek_llm("hi  "), (Words{"hi", "  "}));
  // "a " is a piece after the newline split, so its space is trailing (\s+$) there.
  EXPECT_EQ(split_deepseek_llm("a \nb"), (Words{"a", " ", "\n", "b"}));
  // CJK runs split off last; the fullwidth comma and the ideographic comma are punctuation.
  EXPECT_EQ(split_deepseek_llm("\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C"),
            (Words{"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C", "\xE4\xB8\x96\xE7\x95\x8C"}));
  EXPECT_EQ(split_deepseek_llm("\xE3\x82\xA2\xE3\x80\x81\xE3\x82\xA4"),
            (Words{"\xE3\x82\xA2", "\xE3\x80\x81", "\xE3\x82\xA4"}));  // katakana, U+3001
  EXPECT_EQ(split_deepseek_llm("\xED\x95\x9C\xEA\xB5\xAD 123"),
            (Words{"\xED\x95\x9C\xEA\xB5\xAD", " ", "123"}));  // Hangul
  // The letter class is the tokenizer's list, not \p{L}: Armenian capitals are in it, small
  // letters are not (they stay a gap).
  EXPECT_EQ(split_deepseek_llm("\xD5\xA1\xD5\xA2 \xD4\xB1\xD5\xA2"),
            (Words{"\xD5\xA1\xD5\xA2", " \xD4\xB1", "\xD5\xA2"}));
  EXPECT_EQ(split_deepseek_llm("\xF0\x9F\x9A\x80 ok"), (Words{"\xF0\x9F\x9A\x80", " ok"}));
  EXPECT_EQ(split_deepseek_llm("a\xFF b"), (Words{"a", "\xFF", " b"})) << "ill-formed bytes are a gap";
}

TEST(PreTokenize, DispatchesOnKind) {
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kGpt2, "(ab"), (Words{"(", "ab"}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kLlama3, "(ab 1234"), (Words{"(ab", " ", "123", "4"}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kQwen2, "(ab 12"), (Words{"(ab", " ", "1", "2"}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kDeepseekLlm, "(ab 12"), (Words{"(", "ab", " ", "12"}));
}

}  // namespace
}  // namespace kvs
