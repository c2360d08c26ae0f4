#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/toy_vocab.h"

namespace kvs {
namespace {

using testing::kToyBos;
using testing::toy_byte;

constexpr TokenId kSpaceA = 263;  // "▁a" in the toy SentencePiece vocabulary
const std::string kReplacement = "\xEF\xBF\xBD";

Tokenizer toy() {
  auto tokenizer = Tokenizer::from_vocab(testing::make_toy_spm_vocab());
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

TEST(StreamingDecoder, HoldsBackSplitTwoByteCharacter) {
  const Tokenizer tokenizer = toy();
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(toy_byte(0xC3)), "");
  EXPECT_EQ(decoder.push(toy_byte(0xA9)), "\xC3\xA9");  // é
  EXPECT_EQ(decoder.finish(), "");
}

TEST(StreamingDecoder, HoldsBackSplitEmoji) {
  const Tokenizer tokenizer = toy();
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(kSpaceA), "a");
  EXPECT_EQ(decoder.push(toy_byte(0xF0)), "");
  EXPECT_EQ(decoder.push(toy_byte(0x9F)), "");
  EXPECT_EQ(decoder.push(toy_byte(0x98)), "");
  EXPECT_EQ(decoder.push(toy_byte(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(decoder.push(kSpaceA), " a");
}

TEST(StreamingDecoder, DropsOnlyTheFirstLeadingSpace) {
  const Tokenizer tokenizer = toy();
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(kToyBos), "") << "control tokens render as nothing and keep the first-piece state";
  EXPECT_EQ(decoder.push(kSpaceA), "a");
  EXPECT_EQ(decoder.push(kSpaceA), " a");
}

TEST(StreamingDecoder, ContinuationKeepsLeadingSpace) {
  const Tokenizer tokenizer = toy();
  StreamingDecoder decoder(tokenizer, /*at_sequence_start=*/false);
  EXPECT_EQ(decoder.push(kSpaceA), " a");
}

TEST(StreamingDecoder, FinishFlushesUnfinishedCharacterAsReplacement) {
  const Tokenizer tokenizer = toy();
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(kSpaceA), "a");
  EXPECT_EQ(decoder.push(toy_byte(0xE2)), "");
  EXPECT_EQ(decoder.push(toy_byte(0x82)), "");
  EXPECT_EQ(decoder.finish(), kReplacement);
  EXPECT_EQ(decoder.finish(), "");
}

TEST(StreamingDecoder, InvalidBytesAreReplacedAtOnce) {
  const Tokenizer tokenizer = toy();
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(toy_byte(0xFF)), kReplacement);
  EXPECT_EQ(decoder.push(toy_byte(0xC3)), "");
  EXPECT_EQ(decoder.push(toy_byte(0x41)), kReplacement + "A") << "C3 41: the C3 can no longer complete";
}

TEST(StreamingDecoder, MatchesDecodeForValidText) {
  const Tokenizer tokenizer = toy();
  for (const std::string text : {"a b c", " ab\xC3\xA9 \xF0\x9F\x98\x80!", "\xE4\xB8\xAD a"}) {
    const std::vector<TokenId> ids = tokenizer.encode(text, true);
    StreamingDecoder decoder(tokenizer);
    std::string streamed;
    for (TokenId id : ids) streamed += decoder.push(id);
    streamed += decoder.finish();
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(streamed, tokenizer.decode(ids));
  }
}

}  // namespace
}  // namespace kvs
