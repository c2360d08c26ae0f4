#include <gtest/gtest.h>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/toy_vocab.h"

namespace kvs {
namespace {

using testing::make_toy_bpe_vocab;
using Ids = std::vector<TokenId>;

// Merge ranks: "l o" 0 -> 256, "l l" 1 -> 257, "h e" 2 -> 258, "he l" 3 -> 259, "Ġ w" 4 -> 260,
// "hel lo" 5 -> 261; <|endoftext|> is 262.
const std::vector<std::string> kMerges = {"l o", "l l", "h e", "he l", "\xC4\xA0 w", "hel lo"};

Tokenizer toy(Vocab vocab = make_toy_bpe_vocab(kMerges)) {
  auto tokenizer = Tokenizer::from_vocab(std::move(vocab));
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.status().message();
  return std::move(tokenizer).value();
}

TEST(ByteBpe, LowestRankMergesFirst) {
  const Tokenizer tokenizer = toy();
  // h e l l o: "l o" (rank 0) first, not "l l" (rank 1); then he, hel, hello.
  EXPECT_EQ(tokenizer.encode("hello", false), (Ids{261}));
  // "lll": equal ranks merge leftmost first.
  EXPECT_EQ(tokenizer.encode("lll", false), (Ids{257, 'l'}));
  // " w" merges across the space only inside one pre-tokenized word.
  EXPECT_EQ(tokenizer.encode("hello world", false), (Ids{261, 260, 'o', 'r', 'l', 'd'}));
}

TEST(ByteBpe, NoBosAndNoDummyPrefix) {
  const Tokenizer tokenizer = toy();
  EXPECT_FALSE(tokenizer.add_bos_by_default());
  EXPECT_EQ(tokenizer.bos(), -1);
  EXPECT_EQ(tokenizer.encode("w", true), (Ids{'w'}));
  EXPECT_EQ(tokenizer.decode(Ids{260}), " w") << "byte-level BPE keeps leading spaces";
}

TEST(ByteBpe, EveryByteRoundTrips) {
  const Tokenizer tokenizer = toy();
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  const Ids ids = tokenizer.encode(all_bytes, false);
  EXPECT_EQ(tokenizer.decode(ids), all_bytes) << "invalid UTF-8 included";
  EXPECT_EQ(tokenizer.token_bytes(' '), " ");
  EXPECT_EQ(tokenizer.token_text(' '), "\xC4\xA0");
  EXPECT_EQ(tokenizer.token_bytes(0xFF), "\xFF");
}

TEST(ByteBpe, ControlTokensParsedOnlyOnRequest) {
  const Tokenizer tokenizer = toy();
  EXPECT_EQ(tokenizer.encode("he<|endoftext|>", false, true), (Ids{258, 262}));
  const Ids plain = tokenizer.encode("<|endoftext|>", false);
  EXPECT_EQ(plain.size(), 13u);
  EXPECT_EQ(tokenizer.decode(plain), "<|endoftext|>");
  EXPECT_EQ(tokenizer.decode(Ids{258, 262, 258}), "hehe");
  EXPECT_TRUE(tokenizer.is_end_of_generation(262));
}

TEST(ByteBpe, Llama3TakesWholeWordsThatAreTokens) {
  Vocab vocab = make_toy_bpe_vocab(kMerges);
  vocab.tokens.push_back("abc");  // 263: reachable by no merge
  vocab.types.push_back(TokenType::kNormal);
  vocab.pre = PreTokenizerKind::kLlama3;
  EXPECT_EQ(toy(vocab).encode("abc", false), (Ids{263}));
  vocab.pre = PreTokenizerKind::kGpt2;
  EXPECT_EQ(toy(vocab).encode("abc", false), (Ids{'a', 'b', 'c'}));
}

TEST(ByteUnicode, MapIsABijection) {
  EXPECT_EQ(byte_unicode::code_point_of(' '), 0x120u);
  EXPECT_EQ(byte_unicode::code_point_of('\n'), 0x10Au);
  EXPECT_EQ(byte_unicode::code_point_of('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(byte_unicode::code_point_of(0xAD), 0x143u);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(byte_unicode::byte_of(byte_unicode::code_point_of(static_cast<uint8_t>(b))), b);
  }
  EXPECT_FALSE(byte_unicode::byte_of(0x7F).has_value());
  EXPECT_FALSE(byte_unicode::byte_of(0x144).has_value());
  EXPECT_EQ(byte_unicode::encode("a b\n"), "a\u0120b\u010A");  // "aĠbĊ"
  EXPECT_EQ(byte_unicode::decode("a\xC4\xA0"
                                 "b\xC4\x8A"),
            "a b\n");
}

}  // namespace
}  // namespace kvs
