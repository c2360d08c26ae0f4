// JSON mode on the default model (a story model that never writes JSON unprompted): every output is drawn among
// the tokens that continue one JSON object and that leave one max_tokens can still close, so every output, greedy,
// sampled over many seeds, parallel samples, under budgets from 2 to 400 tokens, is one JSON object (nlohmann
// parses it) and ends as complete within its budget; batched equals alone.
// Structured outputs likewise: with a JSON Schema every output, over seeds, parallel samples and budgets from the
// schema's shortest instance up, is an instance of the schema (tests/json_schema_validator.h) complete within its
// budget, for schemas that use each supported feature: required and optional properties, nested objects, arrays
// with item counts, enums, consts, strings with lengths, numbers, integers, booleans, null, anyOf, $ref/$defs with
// recursion.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "default_model.h"
#include "engine/engine.h"
#include "engine_trace.h"
#include "grammar/json_schema.h"
#include "json_schema_validator.h"

namespace kvs {
namespace {

struct Output {
  std::vector<TokenId> tokens;
  FinishReason reason = FinishReason::kLength;
};

// Every request at once on one engine; outputs by request and sample.
std::vector<std::vector<Output>> run_all(test::DefaultModel& f, const std::vector<RequestParams>& requests) {
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.blocks = 512}});
  EXPECT_TRUE(engine) << engine.status().message();
  std::vector<std::vector<Output>> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    out[i].resize(requests[i].num_samples);
    auto id = (*engine)->add_request(requests[i], [&out, i](const RequestOutput& o) {
      EXPECT_TRUE(o.error.is_ok()) << o.error.message();
      Output& s = out[i][o.sample];
      s.tokens.insert(s.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished) s.reason = o.finish_reason;
    });
    EXPECT_TRUE(id) << id.status().message();
  }
  while ((*engine)->step()) {
  }
  return out;
}

RequestParams json_request(const test::DefaultModel& f, float temperature, uint64_t seed, size_t samples = 1,
                           size_t max_tokens = 400) {
  RequestParams p;
  p.prompt = f.tokenizer->encode("Once upon a time", true);
  p.max_new_tokens = max_tokens;
  p.sampling = {.temperature = temperature, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed};
  p.num_samples = samples;
  p.json_object = true;
  return p;
}

void expect_whole_object(const test::DefaultModel& f, const Output& o, size_t max_tokens) {
  std::string text;
  for (TokenId t : o.tokens) text += f.tokenizer->token_bytes(t);
  EXPECT_EQ(o.reason, FinishReason::kDocumentComplete) << text;
  EXPECT_LE(o.tokens.size(), max_tokens);
  EXPECT_TRUE(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_object()) << text;
}

TEST(JsonMode, EveryOutputIsOneJsonObjectWithinItsBudget) {
  test::DefaultModel f;
  std::vector<RequestParams> requests = {json_request(f, 0.0f, 0)};
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    const size_t budgets[] = {2, 3, 7, 20, 60, 400};
    requests.push_back(json_request(f, 1.0f, seed, 1, budgets[seed % std::size(budgets)]));
  }
  requests.push_back(json_request(f, 0.8f, 99, /*samples=*/3));
  const auto batched = run_all(f, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    for (const Output& o : batched[i]) expect_whole_object(f, o, requests[i].max_new_tokens);
  }
  for (size_t i : {0u, 5u, 25u}) EXPECT_EQ(run_all(f, {requests[i]})[0][0].tokens, batched[i][0].tokens) << i;
}

TEST(JsonMode, ABudgetTooSmallForAnObjectIsRefused) {
  test::DefaultModel f;
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.blocks = 64}});
  ASSERT_TRUE(engine);
  const auto id = (*engine)->add_request(json_request(f, 0.0f, 0, 1, 1), [](const RequestOutput&) {});
  ASSERT_FALSE(id);
  EXPECT_NE(id.status().message().find("max_tokens is 1"), std::string::npos) << id.status().message();
}

const char* const kSchemas[] = {
    // required and optional properties, strings with lengths, integers, numbers, booleans, enums, arrays, nesting
    R"({"type":"object","properties":{
      "name":{"type":"string","minLength":2,"maxLength":16},
      "age":{"type":"integer"},
      "height":{"type":"number"},
      "nickname":{"type":"string"},
      "pets":{"type":"array","items":{"enum":["cat","dog","fish"]},"minItems":1,"maxItems":3},
      "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":["integer","null"]}},
                 "required":["city"]},
      "happy":{"type":"boolean"}},
      "required":["name","age","pets","happy"],"additionalProperties":false})",
    // anyOf of objects told apart by a const, null
    R"({"type":"object","properties":{"shape":{"anyOf":[
        {"type":"object","properties":{"kind":{"const":"circle"},"radius":{"type":"number"}},"required":["kind","radius"]},
        {"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"integer"}},"required":["kind","side"]},
        {"type":"null"}]}},"required":["shape"]})",
    // $ref/$defs with recursion: a tree
    R"({"$defs":{"node":{"type":"object","properties":{"label":{"type":"string","maxLength":8},
        "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["label","children"]}},
      "type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"required":["root"]})",
    // untyped values and a list of any length
    R"({"type":"object","properties":{"data":{},"list":{"type":"array","items":{"type":"number"}}},
      "required":["data","list"]})",
};

RequestParams schema_request(const test::DefaultModel& f, const std::shared_ptr<const JsonSchema>& schema,
                             uint64_t seed, size_t max_tokens, size_t samples = 1) {
  RequestParams p;
  p.prompt = f.tokenizer->encode("Once upon a time", true);
  p.max_new_tokens = max_tokens;
  p.sampling = {.temperature = seed == 0 ? 0.0f : 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed};
  p.num_samples = samples;
  p.json_schema = schema;
  return p;
}

TEST(StructuredOutput, EveryOutputIsAnInstanceOfTheSchemaWithinItsBudget) {
  test::DefaultModel f;
  for (const char* text : kSchemas) {
    SCOPED_TRACE(text);
    auto schema = JsonSchema::compile(text);
    ASSERT_TRUE(schema) << schema.status().message();
    const size_t shortest = (*schema)->node((*schema)->root()).shortest;
    std::vector<RequestParams> requests = {schema_request(f, *schema, 0, 300)};
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const size_t budgets[] = {shortest, shortest + 5, 120, 300};
      requests.push_back(schema_request(f, *schema, seed, budgets[seed % std::size(budgets)]));
    }
    requests.push_back(schema_request(f, *schema, 77, 300, /*samples=*/3));
    const auto batched = run_all(f, requests);
    const nlohmann::json schema_json = nlohmann::json::parse(text);
    for (size_t i = 0; i < requests.size(); ++i) {
      for (const Output& o : batched[i]) {
        std::string out;
        for (TokenId t : o.tokens) out += f.tokenizer->token_bytes(t);
        SCOPED_TRACE(::testing::Message() << "request " << i << ": " << out);
        EXPECT_EQ(o.reason, FinishReason::kDocumentComplete);
        EXPECT_LE(o.tokens.size(), requests[i].max_new_tokens);
        const auto value = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
        ASSERT_FALSE(value.is_discarded());
        EXPECT_TRUE(test::valid_instance(value, schema_json));
      }
    }
    for (size_t i : {0u, 3u}) EXPECT_EQ(run_all(f, {requests[i]})[0][0].tokens, batched[i][0].tokens) << i;
  }
}

TEST(StructuredOutput, ABudgetBelowTheShortestInstanceIsRefused) {
  test::DefaultModel f;
  auto schema = JsonSchema::compile(kSchemas[0]);
  ASSERT_TRUE(schema);
  auto engine = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.blocks = 64}});
  ASSERT_TRUE(engine);
  const auto id = (*engine)->add_request(schema_request(f, *schema, 0, 10), [](const RequestOutput&) {});
  ASSERT_FALSE(id);
  EXPECT_EQ(id.status().field(), "max_tokens");
  EXPECT_NE(id.status().message().find("max_tokens is 10"), std::string::npos) << id.status().message();
}

}  // namespace
}  // namespace kvs
