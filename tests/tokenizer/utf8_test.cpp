#include "core/utf8.h"

#include <gtest/gtest.h>

#include "tokenizer/unicode_ranges.h"

namespace kvs {
namespace {

TEST(Utf8, DecodesValidCharacters) {
  const struct {
    std::string text;
    uint32_t code_point;
    size_t length;
  } cases[] = {{"A", 0x41, 1}, {"\xC3\xA9", 0xE9, 2}, {"\xE2\x82\xAC", 0x20AC, 3}, {"\xF0\x9F\x98\x80", 0x1F600, 4}};
  for (const auto& c : cases) {
    const utf8::DecodedChar d = utf8::decode(c.text, 0);
    EXPECT_TRUE(d.valid) << c.text;
    EXPECT_EQ(d.code_point, c.code_point);
    EXPECT_EQ(d.length, c.length);
    std::string encoded;
    utf8::append(encoded, c.code_point);
    EXPECT_EQ(encoded, c.text);
  }
}

TEST(Utf8, RejectsIllFormedSequences) {
  const struct {
    std::string text;
    size_t length;  // of the maximal ill-formed subpart
  } cases[] = {
      {"\x80", 1},              // lone continuation byte
      {"\xC0\x80", 1},          // overlong lead
      {"\xE0\x80\x80", 1},      // overlong 3-byte form
      {"\xED\xA0\x80", 1},      // surrogate U+D800
      {"\xF4\x90\x80\x80", 1},  // above U+10FFFF
      {"\xF5", 1},
      {"\xE2\x82", 2},  // truncated
      {std::string("\xF0\x9F\x98") + "a", 3},
  };
  for (const auto& c : cases) {
    const utf8::DecodedChar d = utf8::decode(c.text, 0);
    EXPECT_FALSE(d.valid);
    EXPECT_EQ(d.code_point, utf8::kReplacementChar);
    EXPECT_EQ(d.length, c.length);
  }
}

TEST(Utf8, CompletePrefixHoldsBackOnlyCompletableTails) {
  EXPECT_EQ(utf8::complete_prefix_length(""), 0u);
  EXPECT_EQ(utf8::complete_prefix_length("abc"), 3u);
  EXPECT_EQ(utf8::complete_prefix_length("a\xE2"), 1u);
  EXPECT_EQ(utf8::complete_prefix_length("a\xE2\x82"), 1u);
  EXPECT_EQ(utf8::complete_prefix_length("a\xE2\x82\xAC"), 4u);
  EXPECT_EQ(utf8::complete_prefix_length("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(utf8::complete_prefix_length("a\x80"), 2u) << "a stray continuation never completes";
  EXPECT_EQ(utf8::complete_prefix_length("a\xE2\x41"), 3u) << "E2 41 is already broken";
  EXPECT_EQ(utf8::complete_prefix_length("a\xE0\x80"), 3u) << "E0 80 can only be overlong";
}

TEST(Utf8, SanitizeReplacesEachIllFormedSubpart) {
  EXPECT_EQ(utf8::sanitize("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(utf8::sanitize(std::string("a\xE2\x82") + "b"), "a\uFFFDb");
  EXPECT_EQ(utf8::sanitize("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(UnicodeRanges, ClassifiesScripts) {
  using unicode::CharClass;
  for (uint32_t cp : {0x61u, 0x5Au, 0xE9u, 0x3A9u, 0x416u, 0x5D0u, 0x628u, 0x915u, 0xE01u, 0x1780u, 0x1EEDu, 0x4E2Du,
                      0x3042u, 0x30AFu, 0xD55Cu, 0x20000u}) {
    EXPECT_EQ(unicode::char_class(cp), CharClass::kLetter) << std::hex << cp;
  }
  for (uint32_t cp : {0x30u, 0x39u, 0xBDu, 0x663u, 0x966u, 0x216Bu, 0xFF13u, 0x1D7CEu}) {
    EXPECT_EQ(unicode::char_class(cp), CharClass::kNumber) << std::hex << cp;
  }
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x2003u, 0x2028u, 0x3000u}) {
    EXPECT_EQ(unicode::char_class(cp), CharClass::kWhitespace) << std::hex << cp;
  }
  // Punctuation, symbols, combining marks (Khmer and Devanagari vowel signs), emoji, ZWJ, ZWSP.
  for (uint32_t cp : {0x21u, 0x27u, 0x7Eu, 0x00u, 0x301u, 0x93Eu, 0x17B6u, 0x1F680u, 0x200Du, 0x200Bu, 0xFF5Eu}) {
    EXPECT_EQ(unicode::char_class(cp), CharClass::kOther) << std::hex << cp;
  }
}

}  // namespace
}  // namespace kvs
