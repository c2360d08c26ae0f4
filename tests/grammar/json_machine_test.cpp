// The JSON recognizer of JSON mode: valid documents are read to completion, each invalid one is refused at the
// first byte no valid document continues with, and, against nlohmann's parser over random documents and random
// mutations of them, it accepts exactly the complete documents that parse (within its limits: a top-level object,
// nesting <= 32, whitespace runs <= 16). The token index allows exactly the tokens a copy of the state accepts.
#include "grammar/json_machine.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "grammar/json_constraint.h"

namespace kvs {
namespace {

// Bytes read before the first refused one (the whole length when none is).
size_t accepted_prefix(std::string_view text, JsonMachine m = JsonMachine()) {
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.feed(static_cast<uint8_t>(text[i]))) return i;
  return text.size();
}

bool complete(std::string_view text, bool object_only = true) {
  JsonMachine m(object_only);
  return m.feed(text) && m.complete();
}

TEST(JsonMachine, ReadsValidDocumentsToTheEnd) {
  for (const std::string doc : {
           R"({})",
           R"( { "a" : 1 } )",
           R"({"a":[],"b":[[]],"c":{},"d":[{}]})",
           R"({"n":[0,-0,12,-3.25,1e5,1E+5,2.5e-3,-0.0e0]})",
           R"({"t":true,"f":false,"z":null,"s":"x\"\\\/\b\f\n\r\tq\u00e9\uD83D\uDE00"})",
           "{\"utf8\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
           "{\n\t\"a\" :\r\n [1 , 2]\n}",
       }) {
    EXPECT_TRUE(complete(doc)) << doc;
    EXPECT_TRUE(nlohmann::json::accept(doc)) << doc;
  }
  EXPECT_TRUE(complete(R"([1,"a",{"b":[true]}])", /*object_only=*/false));
  EXPECT_TRUE(complete(R"({"big":-1.5e99})"));
  EXPECT_EQ(accepted_prefix(R"({"big":1e100})"), 11u) << "three exponent digits";
  EXPECT_TRUE(complete(R"("a string")", false));
  EXPECT_FALSE(complete(R"({"a":1)")) << "not closed";
}

TEST(JsonMachine, RefusesTheFirstByteNoDocumentContinuesWith) {
  const std::vector<std::pair<std::string, size_t>> cases = {
      {R"([1])", 0},                    // json_object: the document is an object
      {R"({"a" 1})", 5},                // a colon is due
      {R"({"a":01})", 6},               // no leading zeros
      {R"({"a":1,})", 7},               // no trailing comma
      {R"({"a":[1,]})", 8},             //
      {R"({"a":tru})", 8},              // true misspelt
      {R"({a:1})", 1},                  // keys are strings
      {R"({"a":-})", 6},                // a digit after '-'
      {R"({"a":1.})", 7},               // a digit after '.'
      {R"({"a":1e})", 7},               // exponent digits
      {"{\"a\":\"x\ty\"}", 7},          // control characters in strings are escaped
      {R"({"a":"\x"})", 7},             // unknown escape
      {R"({"a":"\u12g4"})", 10},        // hex digits
      {R"({"a":"\udc00"})", 9},         // a low surrogate alone
      {R"({"a":"\ud83d"})", 12},        // a high surrogate alone
      {R"({"a":"\ud83d\u0041"})", 14},  // a high surrogate before no low one
      {"{\"a\":\"\xc0\x80\"}", 6},      // overlong NUL
      {"{\"a\":\"\xed\xa0\x80\"}", 7},  // a UTF-16 surrogate in UTF-8
      {"{\"a\":\"\xe0\x80\x80\"}", 7},  // overlong
      {"{\"a\":\"\x80\"}", 6},          // a continuation byte alone
      {R"({"a":1}x)", 7},               // only whitespace after the document
      {R"({"a":1]})", 6},               // the wrong bracket
  };
  for (const auto& [text, at] : cases) EXPECT_EQ(accepted_prefix(text), at) << text;
  std::string spaced = "{";  // appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on operator+
  spaced.append(17, ' ').append("}");
  EXPECT_EQ(accepted_prefix(spaced), 17u) << "whitespace runs are bounded";
  std::string deep = "{\"a\":";
  for (size_t i = 1; i < JsonMachine::kMaxDepth; ++i) deep += "[";
  const size_t depth_limit = deep.size();
  deep += "[";
  EXPECT_EQ(accepted_prefix(deep), depth_limit) << "nesting is bounded";
}

// Random JSON documents (objects at the top), as nlohmann writes them, compact and indented.
nlohmann::json random_value(std::mt19937& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 3 ? 5 : 7));
  switch (kind) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng() % 20000) - 10000;
    case 3: return std::ldexp(static_cast<double>(rng() % 100000) - 50000, -static_cast<int>(rng() % 30));
    case 4: {
      std::string s;
      const char* pieces[] = {"a", "Z", " ", "\"", "\\", "\n", "\x01", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                              "/"};
      for (size_t i = rng() % 8; i > 0; --i) s += pieces[rng() % std::size(pieces)];
      return s;
    }
    case 5: {
      nlohmann::json a = nlohmann::json::array();
      for (size_t i = rng() % 4; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      nlohmann::json o = nlohmann::json::object();
      for (size_t i = rng() % 4; i > 0; --i)
        o[std::string("k").append(std::to_string(rng() % 10))] = random_value(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonMachine, AgreesWithNlohmannOnRandomDocumentsAndMutations) {
  std::mt19937 rng(17);
  size_t parsed_mutants = 0;
  for (int round = 0; round < 3000; ++round) {
    nlohmann::json doc = nlohmann::json::object();
    for (size_t i = rng() % 5; i > 0; --i) doc[std::string("key").append(std::to_string(i))] = random_value(rng, 1);
    const std::string text = doc.dump(round % 2 == 0 ? -1 : 1);
    ASSERT_TRUE(complete(text)) << text;
    // A mutation: one byte replaced, dropped or inserted.
    std::string mutant = text;
    const size_t at = rng() % mutant.size();
    const char bytes[] = "{}[],:\"\\ 0123456789-+.eEtrufalsn\x01\x80\xc3";
    const char b = bytes[rng() % (sizeof bytes - 1)];
    switch (rng() % 3) {
      case 0: mutant[at] = b; break;
      case 1: mutant.erase(at, 1); break;
      default: mutant.insert(at, 1, b);
    }
    // Exponents of three digits and more are past the recognizer's limit (1e400 does not parse; 1e100 does).
    static const std::regex long_exponent("[0-9][eE][+-]?[0-9]{3}");
    if (std::regex_search(mutant, long_exponent)) {
      EXPECT_FALSE(complete(mutant)) << mutant;
      continue;
    }
    const bool parses = nlohmann::json::accept(mutant) && nlohmann::json::parse(mutant).is_object();
    parsed_mutants += parses;
    EXPECT_EQ(complete(mutant), parses) << mutant;
  }
  EXPECT_GT(parsed_mutants, 100u) << "the mutations also make valid documents";
}

// The bytes that complete a document: a state's completion_length is met by its shortest completion.
TEST(JsonMachine, CompletionLengthIsTheShortestCompletion) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"", "{}"},
                                                                  {"{", "}"},
                                                                  {"{\"", "\":0}"},
                                                                  {"{\"a", "\":0}"},
                                                                  {"{\"a\"", ":0}"},
                                                                  {"{\"a\":", "0}"},
                                                                  {"{\"a\":[", "]}"},
                                                                  {"{\"a\":[1,", "0]}"},
                                                                  {"{\"a\":-", "0}"},
                                                                  {"{\"a\":1.", "0}"},
                                                                  {"{\"a\":tr", "ue}"},
                                                                  {"{\"a\":\"\\", "n\"}"},
                                                                  {"{\"a\":\"\\u1", "234\"}"},
                                                                  {"{\"a\":\"\xe2", "\x82\xac\"}"},
                                                                  {"{\"a\":1,", "\"\":0}"},
                                                                  {"{\"a\":{\"b\":[[", "]]}}"},
                                                                  {"{}", ""}};
  for (const auto& [prefix, completion] : cases) {
    JsonMachine m;
    ASSERT_TRUE(m.feed(prefix)) << prefix;
    EXPECT_EQ(m.completion_length(), completion.size()) << prefix;
    EXPECT_TRUE(m.feed(completion) && m.complete()) << prefix << completion;
  }
}

// Under a budget of tokens the constraint closes the document in time: random draws among the allowed tokens of a
// small vocabulary (one-byte tokens included, as every byte-fallback vocabulary has) always end complete.
TEST(JsonConstraint, ClosesTheDocumentWithinTheTokensLeft) {
  std::vector<std::string> vocab = {"",  "{\"", "\":", "\"", "hello world", "[",     "]", "{",
                                    "}", ",",   "1",   "-",  "true",        "\\u00", " ", "\n  "};
  for (int c = 0x20; c < 0x7f; ++c) vocab.emplace_back(1, static_cast<char>(c));
  auto index = std::make_shared<const JsonTokenIndex>(vocab, std::vector<TokenId>{0});
  std::mt19937 rng(3);
  for (size_t budget : {2u, 3u, 5u, 8u, 13u, 40u}) {
    for (int round = 0; round < 200; ++round) {
      JsonConstraint constraint(index);
      std::string text;
      size_t used = 0;
      while (!constraint.complete()) {
        ASSERT_LT(used, budget) << "past the budget: " << text;
        std::vector<float> logits(vocab.size());
        for (float& l : logits) l = static_cast<float>(rng() % 1000);
        ASSERT_TRUE(constraint.mask(logits, budget - used - 1)) << text;
        const auto best = static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        constraint.accept(best);
        text += vocab[static_cast<size_t>(best)];
        ++used;
      }
      EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_object()) << text;
    }
  }
}

TEST(JsonTokenIndex, AllowsExactlyTheTokensAStateAccepts) {
  const std::vector<std::string> vocab = {
      "",    "{",    "}",    "\"", "\"a\"", ":",   " ", "1", "23", ",",   "tr", "ue", "abc", "x\"",
      "\\n", "\xc3", "\xa9", "\t", "}\n",   "\":", "é", "[", "]",  "\"}", "1",  "abc"};  // the last two repeat earlier
                                                                                         // tokens
  const JsonTokenIndex index(vocab, {0});
  std::vector<uint8_t> allowed;
  std::vector<JsonMachine> scratch;
  for (const std::string prefix : {"", "{", "{\"", "{\"ab", "{\"k\":", "{\"k\":\"", "{\"k\":\"\xc3", "{\"k\":1",
                                   "{\"k\":[", "{\"k\":tr", "{\"k\":1}"}) {
    JsonMachine m;
    ASSERT_TRUE(m.feed(prefix)) << prefix;
    index.allowed(m, SIZE_MAX, allowed, scratch);
    for (size_t t = 0; t < vocab.size(); ++t) {
      JsonMachine trial = m;
      const bool want = t == 0 ? m.complete() : trial.feed(vocab[t]);
      EXPECT_EQ(allowed[t] != 0, want) << "after '" << prefix << "', token '" << vocab[t] << "'";
    }
  }
}

}  // namespace
}  // namespace kvs
