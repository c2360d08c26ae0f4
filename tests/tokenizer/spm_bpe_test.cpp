#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/toy_vocab.h"

namespace kvs {
namespace {

using testing::kToyBos;
using testing::kToyEos;
using testing::kToyUnk;
using testing::make_toy_spm_vocab;
using testing::toy_byte;

constexpr TokenId kSpace = 259, kA = 260, kB = 261, kC = 262, kSpaceA = 263, kAb = 264, kAbc = 266, kAa = 267;
constexpr TokenId kUser = 268, kSpaceSpace = 269;

Tokenizer toy(Vocab vocab = make_toy_spm_vocab()) {
  auto tokenizer = Tokenizer::from_vocab(std::move(vocab));
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

using Ids = std::vector<TokenId>;

TEST(SpmBpe, HighestScoreMergesFirst) {
  // ▁ a b c: "ab" (-0.5) beats "▁a" (-1); then "abc" (-0.1) forms; "▁abc" is no token.
  EXPECT_EQ(toy().encode("abc", false), (Ids{kSpace, kAbc}));
}

TEST(SpmBpe, EqualScoresMergeLeftmostFirst) {
  Vocab vocab = make_toy_spm_vocab();
  vocab.add_space_prefix = false;
  EXPECT_EQ(toy(std::move(vocab)).encode("aaa", false), (Ids{kAa, kA}));
}

TEST(SpmBpe, DummyPrefixAndSpaces) {
  const Tokenizer tokenizer = toy();
  EXPECT_EQ(tokenizer.encode("a", false), (Ids{kSpaceA}));
  EXPECT_EQ(tokenizer.encode(" a", false), (Ids{kSpace, kSpaceA}));
  EXPECT_EQ(tokenizer.encode("a  a", false), (Ids{kSpaceA, kSpace, kSpaceA}));
  EXPECT_EQ(tokenizer.encode(" ", false), (Ids{kSpaceSpace}));
  EXPECT_EQ(tokenizer.encode("", false), Ids{});
  EXPECT_EQ(tokenizer.encode("", true), (Ids{kToyBos}));
  EXPECT_EQ(tokenizer.encode("a", true), (Ids{kToyBos, kSpaceA}));
}

TEST(SpmBpe, NoDummyPrefixWhenDisabled) {
  Vocab vocab = make_toy_spm_vocab();
  vocab.add_space_prefix = false;
  const Tokenizer tokenizer = toy(std::move(vocab));
  EXPECT_EQ(tokenizer.encode("ab", false), (Ids{kAb}));
  EXPECT_EQ(tokenizer.decode(Ids{kSpaceA}), " a") << "no prefix, so no space to drop";
}

TEST(SpmBpe, ByteFallbackForUnknownCharacters) {
  const Tokenizer tokenizer = toy();
  // "é" is U+00E9 = C3 A9; "😀" is F0 9F 98 80.
  EXPECT_EQ(tokenizer.encode("\xC3\xA9", false), (Ids{kSpace, toy_byte(0xC3), toy_byte(0xA9)}));
  EXPECT_EQ(tokenizer.encode("a\xF0\x9F\x98\x80", false),
            (Ids{kSpaceA, toy_byte(0xF0), toy_byte(0x9F), toy_byte(0x98), toy_byte(0x80)}));
  EXPECT_EQ(tokenizer.encode("\n", false), (Ids{kSpace, toy_byte('\n')}));
}

TEST(SpmBpe, InvalidUtf8FallsBackToBytesAndRoundTrips) {
  const Tokenizer tokenizer = toy();
  const std::string text = std::string("a\xFF") + "b\xE2\x82";
  EXPECT_EQ(tokenizer.encode(text, false), (Ids{kSpaceA, toy_byte(0xFF), kB, toy_byte(0xE2), toy_byte(0x82)}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, false)), text);
}

TEST(SpmBpe, WithoutByteTokensUnknownCharactersBecomeUnk) {
  Vocab vocab = make_toy_spm_vocab();
  vocab.tokens[toy_byte(0xA9)] = "not-a-byte";
  EXPECT_EQ(toy(std::move(vocab)).encode("\u00E9a", false), (Ids{kSpace, kToyUnk, kA}));
}

TEST(SpmBpe, SpecialTokensAreTextUnlessParseSpecial) {
  const Tokenizer tokenizer = toy();
  const Ids plain = tokenizer.encode("a</s>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kToyEos), 0);
  EXPECT_EQ(tokenizer.decode(plain), "a</s>");
  // Parsed: the dummy prefix also starts the text after a special token, as llama.cpp does.
  EXPECT_EQ(tokenizer.encode("a</s>a", false, true), (Ids{kSpaceA, kToyEos, kSpaceA}));
  EXPECT_EQ(tokenizer.encode("<s>a", true, true), (Ids{kToyBos, kToyBos, kSpaceA}));
  EXPECT_EQ(tokenizer.encode("<unk>", false, true), (Ids{kToyUnk}));
}

TEST(SpmBpe, UserDefinedTokensAlwaysMatch) {
  const Tokenizer tokenizer = toy();
  EXPECT_EQ(tokenizer.encode("a<user>a", false), (Ids{kSpaceA, kUser, kSpaceA}));
  EXPECT_EQ(tokenizer.decode(Ids{kA, kUser}), "a<user>");
}

TEST(SpmBpe, DecodeDropsOnlyTheDummyPrefixSpace) {
  const Tokenizer tokenizer = toy();
  EXPECT_EQ(tokenizer.decode(Ids{kSpaceA, kSpaceA}), "a a");
  EXPECT_EQ(tokenizer.decode(Ids{kToyBos, kSpaceA, kToyEos}), "a") << "control tokens render as nothing";
  EXPECT_EQ(tokenizer.decode(Ids{kSpace, kSpaceA}), " a");
  EXPECT_EQ(tokenizer.decode(Ids{kSpaceSpace}), " ");
  EXPECT_EQ(tokenizer.decode(Ids{kA, toy_byte(0xC3), toy_byte(0xA9)}), "a\xC3\xA9");
  for (const char* text : {"abc", " a  b ", "a\tb\nc", "\xC3\xA9t\xC3\xA9", "", " ", "   "}) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, true)), text);
  }
}

TEST(SpmBpe, TokenBytesAndText) {
  const Tokenizer tokenizer = toy();
  EXPECT_EQ(tokenizer.token_bytes(kSpaceA), " a");
  EXPECT_EQ(tokenizer.token_bytes(toy_byte(0x41)), "A");
  EXPECT_EQ(tokenizer.token_bytes(kToyBos), "");
  EXPECT_EQ(tokenizer.token_bytes(kToyUnk), "\xE2\x96\x85") << "llama.cpp renders <unk> as U+2585";
  EXPECT_EQ(tokenizer.token_text(kSpaceA), "\u2581a");
  EXPECT_EQ(tokenizer.token_bytes(-1), "");
  EXPECT_EQ(tokenizer.token_bytes(100000), "");
  EXPECT_EQ(tokenizer.token_text(100000), "");
  EXPECT_EQ(tokenizer.decode(Ids{kSpaceA, 100000, -5, kSpaceA}), "a a");
}

TEST(SpmBpe, Metadata) {
  const Tokenizer tokenizer = toy();
  EXPECT_EQ(tokenizer.vocab_size(), 270u);
  EXPECT_EQ(tokenizer.bos(), kToyBos);
  EXPECT_EQ(tokenizer.eos(), kToyEos);
  EXPECT_TRUE(tokenizer.add_bos_by_default());
  EXPECT_TRUE(tokenizer.is_end_of_generation(kToyEos));
  EXPECT_FALSE(tokenizer.is_end_of_generation(kToyBos));
  EXPECT_FALSE(tokenizer.is_end_of_generation(kC));
}

TEST(SpmBpe, LongInputMergesCompletely) {
  // Many equal pairs: the queue must keep merging leftmost first across the whole text.
  Vocab vocab = make_toy_spm_vocab();
  vocab.add_space_prefix = false;
  const Tokenizer tokenizer = toy(std::move(vocab));
  const Ids ids = tokenizer.encode(std::string(10001, 'a'), false);
  ASSERT_EQ(ids.size(), 5001u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kAa), 5000);
  EXPECT_EQ(ids.back(), kA);
}

}  // namespace
}  // namespace kvs
