// Parsing and validation of request bodies: accepted shapes, defaults, and errors that name the
// field and value.
#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace kvs::server {
namespace {

const RequestLimits kLimits{.context_length = 512, .vocab_size = 512};

ApiExpected<ApiRequest> completion(const std::string& body) {
  return parse_api_request(Endpoint::kCompletions, body, kLimits);
}
ApiExpected<ApiRequest> chat(const std::string& body) {
  return parse_api_request(Endpoint::kChatCompletions, body, kLimits);
}

// The error of a rejected body: its param, and that the message contains `mention`.
void expect_error(const ApiExpected<ApiRequest>& r, const std::string& param, const std::string& mention,
                  int status = 400) {
  ASSERT_FALSE(r.has_value()) << "accepted, expected an error about " << param;
  EXPECT_EQ(r.error().http_status, status);
  EXPECT_EQ(r.error().param, param) << r.error().message;
  EXPECT_NE(r.error().message.find(mention), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().type, "invalid_request_error");
}

TEST(OpenAiRequest, CompletionWithEveryMappedField) {
  auto r = completion(R"({"model":"m","prompt":"Once","max_tokens":20,"temperature":0,"top_p":0.9,"seed":7,
    "stop":["a","b"],"stream":true,"stream_options":{"include_usage":true},"top_k":5,"min_p":0.1,
    "repetition_penalty":1.1,"ignore_eos":true,"echo":true,"n":1,"frequency_penalty":0,"user":"u","logprobs":null})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->prompt_text, "Once");
  EXPECT_EQ(r->max_tokens, 20u);
  EXPECT_EQ(r->sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r->sampling.top_p, 0.9f);
  EXPECT_EQ(r->sampling.top_k, 5u);
  EXPECT_FLOAT_EQ(r->sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r->sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r->seed, 7u);
  EXPECT_EQ(r->stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->stream && r->include_usage && r->ignore_eos && r->echo);
}

// kvserve's kv_window: a sliding window for the one request; a whole number, none by default.
TEST(OpenAiRequest, KvWindow) {
  auto none = completion(R"({"prompt":"x"})");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->kv_window, 0u);
  auto w = chat(R"({"messages":[{"role":"user","content":"x"}],"kv_window":256})");
  ASSERT_TRUE(w.has_value()) << w.error().message;
  EXPECT_EQ(w->kv_window, 256u);
  expect_error(completion(R"({"prompt":"x","kv_window":-1})"), "kv_window", "-1");
  expect_error(completion(R"({"prompt":"x","kv_window":"big"})"), "kv_window", "kv_window");
}

// kvserve's kv_policy: an eviction policy for the one request (none: the server's); under one that evicts,
// max_tokens may exceed the context; its fields are named in errors.
TEST(OpenAiRequest, KvPolicy) {
  auto none = completion(R"({"prompt":"x"})");
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->kv_policy.has_value());
  auto p = completion(
      R"({"prompt":"x","max_tokens":5000,"kv_policy":{"type":"h2o","budget":128,"sinks":4,"recent":32,
          "scores":"pooled","per_query":true,"evict_unit":8}})");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  ASSERT_TRUE(p->kv_policy.has_value());
  EXPECT_EQ(p->kv_policy->kind, KvPolicyKind::kHeavyHitters);
  EXPECT_EQ(p->kv_policy->budget, 128u);
  EXPECT_EQ(p->kv_policy->sinks, 4u);
  EXPECT_EQ(p->kv_policy->recent, 32u);
  EXPECT_EQ(p->kv_policy->scores, KvScoreScope::kPooled);
  EXPECT_TRUE(p->kv_policy->per_query_scores);
  EXPECT_EQ(p->kv_policy->evict_unit, 8u);
  EXPECT_EQ(p->max_tokens, 5000u);
  auto sinks = chat(R"({"messages":[{"role":"user","content":"x"}],"kv_policy":{"type":"sinks","budget":64}})");
  ASSERT_TRUE(sinks.has_value()) << sinks.error().message;
  EXPECT_EQ(sinks->kv_policy->sinks, KvPolicyParams::kDefault);  // the engine resolves defaults
  expect_error(completion(R"({"prompt":"x","max_tokens":5000})"), "max_tokens", "context length");
  expect_error(completion(R"({"prompt":"x","max_tokens":5000,"kv_policy":{"type":"full"}})"), "max_tokens", "5000");
  expect_error(completion(R"({"prompt":"x","kv_policy":"sinks"})"), "kv_policy", "an object");
  expect_error(completion(R"({"prompt":"x","kv_policy":{"budget":64}})"), "kv_policy.type", "'type'");
  expect_error(completion(R"({"prompt":"x","kv_policy":{"type":"lru","budget":64}})"), "kv_policy.type", "lru");
  expect_error(completion(R"({"prompt":"x","kv_policy":{"type":"sinks"}})"), "kv_policy.budget", "budget");
  expect_error(completion(R"({"prompt":"x","kv_policy":{"type":"sinks","budget":-3}})"), "kv_policy.budget", "-3");
  expect_error(completion(R"({"prompt":"x","kv_policy":{"type":"h2o","budget":64,"scores":"all"}})"),
               "kv_policy.scores", "all");
  expect_error(completion(R"({"prompt":"x","kv_policy":{"type":"h2o","budget":64,"heavy":3}})"), "kv_policy.heavy",
               "heavy");
}

// n choices of best_of samples (best_of defaults to n), on both endpoints; n samples can be streamed.
TEST(OpenAiRequest, ParallelSamples) {
  auto defaults = completion(R"({"prompt":"x"})");
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ(defaults->n, 1u);
  EXPECT_EQ(defaults->best_of, 1u);
  auto n = chat(R"({"messages":[{"role":"user","content":"x"}],"n":4,"stream":true})");
  ASSERT_TRUE(n.has_value()) << n.error().message;
  EXPECT_EQ(n->n, 4u);
  EXPECT_EQ(n->best_of, 4u);
  auto best = completion(R"({"prompt":"x","n":2,"best_of":5})");
  ASSERT_TRUE(best.has_value()) << best.error().message;
  EXPECT_EQ(best->n, 2u);
  EXPECT_EQ(best->best_of, 5u);
  auto best_chat = chat(R"({"messages":[{"role":"user","content":"x"}],"best_of":3})");
  ASSERT_TRUE(best_chat.has_value()) << best_chat.error().message;
  EXPECT_EQ(best_chat->n, 1u);
  EXPECT_EQ(best_chat->best_of, 3u);
}

TEST(OpenAiRequest, OpenAiSamplingDefaults) {
  auto r = completion(R"({"prompt":"x"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->sampling.temperature, 1.0f);
  EXPECT_EQ(r->sampling.top_p, 1.0f);
  EXPECT_EQ(r->sampling.top_k, 0u);
  EXPECT_EQ(r->sampling.min_p, 0.0f);
  EXPECT_FALSE(r->max_tokens.has_value());
  EXPECT_FALSE(r->seed.has_value());
}

TEST(OpenAiRequest, PromptShapes) {
  auto single = completion(R"({"prompt":["hello"]})");
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ(single->prompt_text, "hello");
  auto tokens = completion(R"({"prompt":[1,2,3]})");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_TRUE(tokens->prompt_is_tokens);
  EXPECT_EQ(tokens->prompt_tokens, (std::vector<TokenId>{1, 2, 3}));
  auto nested = completion(R"({"prompt":[[4,5]]})");
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->prompt_tokens, (std::vector<TokenId>{4, 5}));
  expect_error(completion(R"({"prompt":["a","b"]})"), "prompt", "one prompt per request");
  expect_error(completion(R"({"prompt":[1,600]})"), "prompt", "between 0 and 511");
  expect_error(completion(R"({"prompt":5})"), "prompt", "got integer 5");
  expect_error(completion(R"({"max_tokens":5})"), "prompt", "'prompt' is required");
}

TEST(OpenAiRequest, ChatMessages) {
  auto r = chat(R"({"messages":[{"role":"developer","content":"Be nice"},
    {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],"max_completion_tokens":9})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "Hi there");
  EXPECT_EQ(r->max_tokens, 9u);
  expect_error(chat(R"({"messages":[]})"), "messages", "at least one");
  expect_error(chat(R"({"model":"m"})"), "messages", "required");
  expect_error(chat(R"({"messages":[{"role":"wizard","content":"x"}]})"), "messages[0].role", "wizard");
  expect_error(chat(R"({"messages":[{"role":"user","content":5}]})"), "messages[0].content", "got integer");
  expect_error(chat(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})"),
               "messages[0].content[0].type", "image_url");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"prompt":"x"})"), "prompt", "Unrecognized");
}

// Tools: the request's tools and choice (server/tool_calls.h), a history with an assistant's calls (arguments
// parsed for the template) and the tool's answer.
TEST(OpenAiRequest, ToolsAndToolMessages) {
  auto r = chat(R"({"messages":[{"role":"user","content":"Weather?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"zeta\": 1, \"alpha\": 2}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"sunny"}],
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
    "tool_choice":"required","parallel_tool_calls":false})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_NE(r->tools, nullptr);
  EXPECT_EQ(r->tools->choice, ToolChoice::kRequired);
  EXPECT_FALSE(r->tools->parallel);
  EXPECT_NE(r->tools->forced, nullptr);
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_TRUE(r->messages[1].null_content);
  const auto& arguments = r->messages[1].tool_calls[0]["function"]["arguments"];
  ASSERT_TRUE(arguments.is_object()) << "parsed for the template";
  EXPECT_EQ(arguments.dump(), R"({"zeta":1,"alpha":2})") << "in the order written";
  EXPECT_EQ(r->messages[2].role, "tool");
  EXPECT_EQ(r->messages[2].tool_call_id, "c1");
  expect_error(chat(R"({"messages":[{"role":"tool","content":"x"}]})"), "messages[0].tool_call_id", "string");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x","tool_calls":[{"id":"a"}]}]})"),
               "messages[0].tool_calls", "only assistant");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"tools":{}})"), "tools", "array");
  expect_error(
      chat(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],
                        "tool_choice":"required","response_format":{"type":"json_object"}})"),
      "tool_choice", "does not combine");
  expect_error(completion(R"({"prompt":"x","tools":[]})"), "tools", "Unrecognized");
}

TEST(OpenAiRequest, BadJsonAndBadTypes) {
  expect_error(completion("{\"prompt\": "), "", "not valid JSON");
  expect_error(completion("[1,2]"), "", "must be a JSON object");
  expect_error(completion(std::string(100, '[') + std::string(100, ']')), "", "nests 100 levels");
  expect_error(completion(R"({"prompt":"x","temperature":"hot"})"), "temperature", "must be a number");
  expect_error(completion(R"({"prompt":"x","stream":"yes"})"), "stream", "must be a boolean");
  expect_error(completion(R"({"prompt":"x","max_tokens":2.5})"), "max_tokens", "must be an integer");
  expect_error(completion(R"({"prompt":"x","stop":[1]})"), "stop", "string");
  expect_error(completion(R"({"prompt":"x","frobnicate":1})"), "frobnicate", "Unrecognized request argument");
}

TEST(OpenAiRequest, RangesAndUnsupportedValues) {
  expect_error(completion(R"({"prompt":"x","max_tokens":0})"), "max_tokens", "between 1 and 512");
  expect_error(completion(R"({"prompt":"x","max_tokens":100000})"), "max_tokens", "context length");
  expect_error(completion(R"({"prompt":"x","temperature":3})"), "temperature", "between 0 and 2");
  expect_error(completion(R"({"prompt":"x","top_p":0})"), "top_p", "greater than 0");
  expect_error(completion(R"({"prompt":"x","n":0})"), "n", "between 1 and 64");
  expect_error(completion(R"({"prompt":"x","n":65})"), "n", "between 1 and 64");
  expect_error(completion(R"({"prompt":"x","n":3,"best_of":2})"), "best_of", "at least 'n' (3), got 2");
  expect_error(completion(R"({"prompt":"x","best_of":2,"stream":true})"), "best_of", "cannot be streamed");
  expect_error(completion(R"({"prompt":"x","presence_penalty":2.5})"), "presence_penalty", "between -2 and 2");
  expect_error(completion(R"({"prompt":"x","frequency_penalty":-3})"), "frequency_penalty", "between -2 and 2");
  expect_error(completion(R"({"prompt":"x","logprobs":6})"), "logprobs", "between 0 and 5");
  expect_error(completion(R"({"prompt":"x","logprobs":true})"), "logprobs", "must be an integer");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":2})"), "logprobs", "must be a boolean");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})"),
               "top_logprobs", "between 0 and 20");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})"), "top_logprobs",
               "needs 'logprobs' set to true");
  expect_error(completion(R"({"prompt":"x","top_logprobs":2})"), "top_logprobs", "Unrecognized request argument");
  expect_error(completion(R"({"prompt":"x","logit_bias":{"512":1}})"), "logit_bias.512", "token ids from 0 to 511");
  expect_error(completion(R"({"prompt":"x","logit_bias":{"a5":1}})"), "logit_bias.a5", "token ids from 0 to 511");
  expect_error(completion(R"({"prompt":"x","logit_bias":{"5":-101}})"), "logit_bias.5", "between -100 and 100");
  expect_error(completion(R"({"prompt":"x","logit_bias":[5]})"), "logit_bias", "must be an object");
  expect_error(completion(R"({"prompt":"x","suffix":"end"})"), "suffix", "not supported");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})"),
               "tools[0].function", "must be an object");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]})"), "functions",
               "not supported");
  expect_error(completion(R"({"prompt":"x","stream_options":{"include_usage":true}})"), "stream_options",
               "only allowed when 'stream' is true");
  expect_error(
      completion(
          R"({"prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})"),
      "stop", "at most 16");
}

// Penalties and bias go to the sampler; logprobs: chat's boolean and top_logprobs, completions' count.
TEST(OpenAiRequest, PenaltiesBiasAndLogprobs) {
  auto c = completion(R"({"prompt":"x","frequency_penalty":0.5,"presence_penalty":-1,"logit_bias":{"7":-100,"9":2.5},
                          "logprobs":3,"echo":true})");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->sampling.frequency_penalty, 0.5f);
  EXPECT_EQ(c->sampling.presence_penalty, -1.0f);
  EXPECT_EQ(c->sampling.logit_bias, (std::vector<std::pair<TokenId, float>>{{7, -100.0f}, {9, 2.5f}}));
  EXPECT_EQ(c->logprobs, 3u);
  EXPECT_TRUE(c->echo);
  auto zero = completion(R"({"prompt":"x","logprobs":0})");
  ASSERT_TRUE(zero.has_value());
  EXPECT_EQ(zero->logprobs, 0u) << "0: the chosen tokens' logprobs, no alternatives";
  auto chat_on = chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":4})");
  ASSERT_TRUE(chat_on.has_value()) << chat_on.error().message;
  EXPECT_EQ(chat_on->logprobs, 4u);
  auto chat_plain = chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})");
  ASSERT_TRUE(chat_plain.has_value());
  EXPECT_EQ(chat_plain->logprobs, 0u);
  auto json_mode = chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})");
  ASSERT_TRUE(json_mode.has_value()) << json_mode.error().message;
  EXPECT_TRUE(json_mode->json_object);
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}})"),
               "response_format.type", "text, json_object or json_schema");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}})"),
               "response_format.json_schema", "must be an object");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],
                        "response_format":{"type":"json_schema","json_schema":{"name":"a"}}})"),
               "response_format.json_schema.schema", "must be a JSON Schema object");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
                        "json_schema":{"name":"a","schema":{"type":"string","format":"email"}}}})"),
               "response_format.json_schema.schema", "'format' is not supported");
  // The schema's properties keep the order the request lists them in (the body is read again in order).
  auto structured = chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
      "json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"zeta":{"type":"integer"},
      "alpha":{"type":"boolean"}},"required":["zeta","alpha"],"additionalProperties":false}}}})");
  ASSERT_TRUE(structured.has_value()) << structured.error().message;
  ASSERT_NE(structured->json_schema, nullptr);
  const JsonSchema::Node& object = structured->json_schema->node(structured->json_schema->root());
  ASSERT_EQ(object.properties.size(), 2u);
  EXPECT_EQ(object.properties[0].key, "\"zeta\"");
  EXPECT_EQ(object.properties[1].key, "\"alpha\"");
  auto chat_off = chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":false})");
  ASSERT_TRUE(chat_off.has_value());
  EXPECT_FALSE(chat_off->logprobs.has_value());
}

TEST(OpenAiRequest, NullMeansNotGivenAndEmptyStopsAreDropped) {
  auto r = completion(R"({"prompt":"x","max_tokens":null,"stop":["", "y"],"seed":null,"n":null})");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_FALSE(r->max_tokens.has_value());
  EXPECT_EQ(r->stop, std::vector<std::string>{"y"});
  auto single_stop = completion(R"({"prompt":"x","stop":"\n"})");
  ASSERT_TRUE(single_stop.has_value());
  EXPECT_EQ(single_stop->stop, std::vector<std::string>{"\n"});
}

TEST(OpenAiRequest, NestingDepthSkipsStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":"[[[[\"]]"}]})"), 3u);
  EXPECT_EQ(json_nesting_depth("1"), 0u);
}

TEST(ApiError, JsonShape) {
  const ApiError e = ApiError::invalid("max_tokens", "too big", "some_code");
  const auto j = e.to_json();
  EXPECT_EQ(j["error"]["message"], "too big");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_EQ(j["error"]["code"], "some_code");
  const auto bare = ApiError::invalid("", "x").to_json();
  EXPECT_TRUE(bare["error"]["param"].is_null());
  EXPECT_TRUE(bare["error"]["code"].is_null());
}

}  // namespace
}  // namespace kvs::server
