// Structured outputs: a JSON Schema compiled (grammar/json_schema.h) and read byte by byte (schema_machine.h).
// Instances are read to the end, the first byte that no instance continues with is refused, unsupported keywords
// are refused by name, and outputs drawn at random among the allowed tokens under budgets of 3 to 200 tokens always
// end complete within the budget and validate against the schema, checked by the naive validator below (written
// from the JSON Schema text, independent of the compiler: tests/json_schema_validator.h).
#include "grammar/schema_machine.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/json_constraint.h"
#include "json_schema_validator.h"

namespace kvs {
namespace {

using nlohmann::json;

std::shared_ptr<const JsonSchema> compiled(const std::string& text) {
  auto schema = JsonSchema::compile(text);
  EXPECT_TRUE(schema.has_value()) << schema.status().message();
  return schema ? *schema : nullptr;
}

bool reads(const JsonSchema& schema, std::string_view text) {
  SchemaMachine m(schema);
  return m.feed(text) && m.complete();
}

size_t accepted_prefix(const JsonSchema& schema, std::string_view text) {
  SchemaMachine m(schema);
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.feed(static_cast<uint8_t>(text[i]))) return i;
  return text.size();
}

const std::string kPerson = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":12},
  "age":{"type":"integer"},
  "email":{"type":"string","minLength":3},
  "tags":{"type":"array","items":{"type":"string","enum":["a","bc","d\"e"]},"minItems":1,"maxItems":3},
  "score":{"type":["number","null"]},
  "ok":{"type":"boolean"}},
  "required":["name","age","tags"],"additionalProperties":false})";

const std::string kTree = R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
  "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"]}},
  "$ref":"#/$defs/node"})";

const std::string kShapes = R"({"anyOf":[
  {"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},
  {"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"number"},"h":{"type":"number"}},
   "required":["kind","w","h"]}]})";

const std::string kLiterals = R"({"type":"object","properties":{"n":{"enum":[1,12,123,null,"x",{"a":[1]}]},
  "any":{},"obj":{"type":"object"},"list":{"type":"array"},"flag":{"type":"boolean"}},
  "required":["n","any","obj","list"]})";

const std::string kMatrix = R"({"type":"array","items":{"type":"array","items":{"type":"integer"},"minItems":2},
  "minItems":1,"maxItems":2})";

const std::string kPydantic = R"({"properties":{"id":{"title":"Id","type":"integer"},
  "kind":{"allOf":[{"$ref":"#/$defs/Kind"}],"description":"what it is"},
  "note":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Note"}},
  "required":["id","kind"],"title":"Item","type":"object",
  "$defs":{"Kind":{"enum":["a","b"],"title":"Kind","type":"string"}}})";

TEST(JsonSchema, ReadsInstancesInTheSchemasOrder) {
  auto person = compiled(kPerson);
  EXPECT_TRUE(reads(*person, R"({"name":"Ann","age":41,"tags":["a"]})"));
  EXPECT_TRUE(reads(*person,
                    "{\n  \"name\" : \"Ann\", \"age\": -3, \"email\": \"a@b\",\n  \"tags\": [\"bc\", "
                    "\"d\\\"e\"], \"score\": null, \"ok\": true\n}"));
  EXPECT_TRUE(reads(*person, R"({"name":"","age":0,"tags":["a","a","a"],"score":-1.5e3})"));
  EXPECT_FALSE(reads(*person, R"({"name":"Ann","age":41})")) << "tags is required (no '}' before it)";
  const std::vector<std::pair<std::string, size_t>> refused = {
      {R"({"age":1)", 2},                                             // name is required first: "a is no key's start
      {R"({"name":"Ann","age":1.5)", 21},                             // an integer
      {R"({"name":"Ann","age":01)", 21},                              // no leading zero
      {R"({"name":"abcdefghijklm")", 21},                             // maxLength 12
      {R"({"name":"a","age":1,"email":"ab")", 31},                    // minLength 3: no quote yet
      {R"({"name":"a","age":1,"tags":[])", 28},                       // minItems 1
      {R"({"name":"a","age":1,"tags":["x")", 29},                     // not in the enum
      {R"({"name":"a","age":1,"tags":["a","a","a",)", 39},            // maxItems 3
      {R"({"name":"a","age":1,"tags":["a"],"zzz")", 34},              // no such property
      {R"({"name":"a","age":1,"tags":["a"],"ok":true,"score")", 42},  // out of order: no ',' after the last
      {R"({"name":"a","age":1,"tags":["a"],"score":"1")", 41},        // number or null
  };
  for (const auto& [text, at] : refused) EXPECT_EQ(accepted_prefix(*person, text), at) << text;

  auto tree = compiled(kTree);
  EXPECT_TRUE(reads(*tree, R"({"value":1,"children":[{"value":2},{"value":3,"children":[]}]})"));
  EXPECT_EQ(accepted_prefix(*tree, R"({"value":1,"children":[{},)"), 24u) << "the child needs its value";
  auto shapes = compiled(kShapes);
  EXPECT_TRUE(reads(*shapes, R"({"kind":"circle","r":2})"));
  EXPECT_TRUE(reads(*shapes, R"({"kind":"rect","w":2,"h":3})"));
  EXPECT_EQ(accepted_prefix(*shapes, R"({"kind":"rect","r")"), 16u);
  auto literals = compiled(kLiterals);
  EXPECT_TRUE(reads(*literals, R"({"n":12,"any":[1,{"x":null}],"obj":{"k":"v"},"list":[1,"a"]})"));
  EXPECT_TRUE(reads(*literals, R"({"n":{"a":[1]},"any":"s","obj":{},"list":[],"flag":false})"));
  EXPECT_EQ(accepted_prefix(*literals, R"({"n":1234)"), 8u);
  EXPECT_EQ(accepted_prefix(*literals, R"({"n":1,"any":1,"obj":[)"), 21u) << "obj is an object";
  auto matrix = compiled(kMatrix);
  EXPECT_TRUE(reads(*matrix, "[[1,2],[3,4,5]]"));
  EXPECT_EQ(accepted_prefix(*matrix, "[[1]"), 3u);
  EXPECT_EQ(accepted_prefix(*matrix, "[[1,2],[3,4],"), 12u);
  auto pydantic = compiled(kPydantic);
  EXPECT_TRUE(reads(*pydantic, R"({"id":7,"kind":"b","note":null})"));
  EXPECT_TRUE(reads(*pydantic, R"({"id":7,"kind":"a","note":"hi"})"));
  EXPECT_EQ(accepted_prefix(*pydantic, R"({"id":7,"kind":"c")"), 16u);
}

TEST(JsonSchema, RefusesWhatItCannotPromiseByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"string","pattern":"^a"})", "'pattern' is not supported"},
      {R"({"type":"object","properties":{"a":{"type":"integer","minimum":0}}})", "at '#/properties/a': 'minimum'"},
      {R"({"oneOf":[{"type":"string"}]})", "'oneOf' is not supported"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'required' names \"b\""},
      {R"({"$ref":"#/$defs/missing"})", "names nothing"},
      {R"({"type":"object","properties":{"a":{"$ref":"#/required/x"}},"required":["a"]})", "names nothing"},
      {R"({"type":"object","required":["a"],"properties":{"a":{}},"anyOf":[{"required":["a"]}]})",
       "'anyOf' beside 'type'"},
      {R"({"$ref":"http://example.com/s.json"})", "not in this document"},
      {R"({"type":"color"})", "unknown type \"color\""},
      {R"({"type":"string","minLength":5,"maxLength":2})", "minLength 5 is over maxLength 2"},
      {R"({"type":"array","minItems":-1})", "'minItems' must be a non-negative integer, got -1"},
      {R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}},"required":["next"]}},
           "$ref":"#/$defs/n"})",
       "no finite instance"},
      {R"(false)", "no instance"},
      {R"({"type":)", "not JSON"},
  };
  for (const auto& [text, message] : cases) {
    auto schema = JsonSchema::compile(text);
    ASSERT_FALSE(schema.has_value()) << text;
    EXPECT_NE(schema.status().message().find(message), std::string::npos)
        << text << " -> " << schema.status().message();
  }
}

TEST(JsonSchema, CompletionLengthIsMetByAShortestCompletion) {
  auto person = compiled(kPerson);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", R"({"name":"","age":0,"tags":["a"]})"},
      {R"({"name":"Ann")", R"(,"age":0,"tags":["a"]})"},
      {R"({"name":"Ann","age":4,"e)", R"(mail":"...","tags":["a"]})"},
      {R"({"name":"Ann","age":4,"tags":["d)", R"(\"e"]})"},
      {R"({"name":"Ann","age":4,"tags":["a"],)", R"("ok":true})"},
      {R"({"name":"Ann","age":4,"tags":["a"],"score":)", "0}"},
      {R"({"name":"Ann","age":4,"tags":["a"],"score":n)", "ull}"},
      {R"({"name":"\ud83d)", R"(\udc00","age":0,"tags":["a"]})"},
  };
  for (const auto& [prefix, completion] : cases) {
    SchemaMachine m(*person);
    ASSERT_TRUE(m.feed(prefix)) << prefix;
    EXPECT_EQ(m.completion_length(), completion.size()) << prefix;
    EXPECT_TRUE(m.feed(completion) && m.complete()) << prefix << completion;
  }
  auto matrix = compiled(kMatrix);
  SchemaMachine m(*matrix);
  ASSERT_TRUE(m.feed("[[1,2],[3"));
  EXPECT_EQ(m.completion_length(), std::string(",0]]").size());
}

// Random draws among the allowed tokens of a small vocabulary (every printable byte a token of its own, as in a
// byte-fallback vocabulary) end complete within every budget and validate.
TEST(JsonSchema, RandomOutputsCloseInTimeAndValidate) {
  std::vector<std::string> vocab = {
      "",     "{\"",    "\":",      "\"",       "hello world",    "[",    "]",       "{",
      "}",    ",",      "1",        "-",        "true",           "null", "\\u00e9", " ",
      "\n  ", "\"name", "\"age\":", "\xc3\xa9", "\\ud83d\\ude00", "123",  "1.5e3",   "\"kind\":\"rect\""};
  for (int c = 0x20; c < 0x7f; ++c) vocab.emplace_back(1, static_cast<char>(c));
  auto index = std::make_shared<const JsonTokenIndex>(vocab, std::vector<TokenId>{0});
  std::mt19937 rng(5);
  for (const std::string& text : {kPerson, kTree, kShapes, kLiterals, kMatrix, kPydantic}) {
    auto schema = compiled(text);
    const json schema_json = json::parse(text);
    for (size_t budget : {3u, 8u, 20u, 40u, 200u}) {
      if (budget < schema->node(schema->root()).shortest) continue;
      for (int round = 0; round < 60; ++round) {
        JsonConstraint constraint(index, schema);
        std::string out;
        size_t used = 0;
        while (!constraint.complete()) {
          ASSERT_LT(used, budget) << "past the budget: " << out;
          std::vector<float> logits(vocab.size());
          for (float& l : logits) l = static_cast<float>(rng() % 1000);
          ASSERT_TRUE(constraint.mask(logits, budget - used - 1)) << out;
          const auto best = static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
          constraint.accept(best);
          out += vocab[static_cast<size_t>(best)];
          ++used;
        }
        const json value = json::parse(out, nullptr, false);
        ASSERT_FALSE(value.is_discarded()) << out;
        EXPECT_TRUE(test::valid_instance(value, schema_json)) << text << "\n" << out;
      }
    }
  }
}

// The token index over the schema machine allows exactly the tokens a copy of the state accepts.
TEST(JsonSchema, TokenIndexAllowsExactlyTheTokensAStateAccepts) {
  const std::vector<std::string> vocab = {"",   "{",   "}", "\"", "\"name\"", ":", " ",  "1", "23", ",",   "tr", "ue",
                                          "ab", "\"a", "]", "[",  "\"age\":", "é", "\\", "n", "-",  "abc", "a"};
  auto person = compiled(kPerson);
  const JsonTokenIndex index(vocab, {0});
  std::vector<uint8_t> allowed;
  std::vector<SchemaMachine> scratch;
  for (const std::string prefix :
       {"", "{", "{\"", "{\"name\":\"", "{\"name\":\"a\",", "{\"name\":\"a\",\"age\":1",
        "{\"name\":\"a\",\"age\":1,\"tags\":[", "{\"name\":\"a\",\"age\":1,\"tags\":[\"a\"]}", "{\"name\":\"abcdefghij",
        "{\"name\":\"abcdefghijab"}) {  // maxLength 12: room for 2, then none
    SchemaMachine m(*person);
    ASSERT_TRUE(m.feed(prefix)) << prefix;
    index.allowed(m, SIZE_MAX, allowed, scratch);
    for (size_t t = 0; t < vocab.size(); ++t) {
      SchemaMachine trial = m;
      const bool want = t == 0 ? m.complete() : trial.feed(vocab[t]);
      EXPECT_EQ(allowed[t] != 0, want) << "after '" << prefix << "', token '" << vocab[t] << "'";
    }
  }
}

}  // namespace
}  // namespace kvs
