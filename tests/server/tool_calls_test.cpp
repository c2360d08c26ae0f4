// Tool calling's request and output halves (server/tool_calls.h): tools and tool_choice validated with errors that
// name the field; the forced schemas (a named function's arguments, `required`'s array of calls, $refs moved with
// the parameters they sit in) accept exactly the calls they should; outputs in the formats chat templates teach
// (Hermes/Qwen, Mistral, Llama 3.x, bare JSON) read back into calls of requested functions, anything else staying
// content; streamed, content goes out as it comes and what may be a call is held back.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include "grammar/schema_machine.h"

namespace kvs::server {
namespace {

using ordered_json = nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"$ref": "#/$defs/unit"}},
                   "required": ["city"], "$defs": {"unit": {"enum": ["c", "f"]}}}}},
  {"type": "function", "function": {"name": "now"}}
])");

ToolRequest request(const ordered_json& choice, bool parallel = true) {
  auto r = parse_tool_request(kTools, choice, parallel);
  EXPECT_TRUE(r) << r.error().message;
  return r ? std::move(*r) : ToolRequest{};
}

bool is_instance(const JsonSchema& schema, std::string_view text) {
  SchemaMachine m(schema);
  return m.feed(text) && m.complete();
}

TEST(ToolCalls, RequestsAreValidatedNamingTheField) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {R"([{"type": "retrieval"}])", "null", "tools[0].type"},
      {R"([{"type": 5}])", "null", "tools[0].type"},
      {R"([{"type": "function", "function": {"name": 7}}])", "null", "tools[0].function.name"},
      {R"([{"type": "function", "function": {"name": "f"}}])", R"({"type": 1})", "tool_choice"},
      {R"([{"type": "function", "function": {"name": "bad name"}}])", "null", "tools[0].function.name"},
      {R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])", "null",
       "tools[1].function.name"},
      {R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "format": "date"}}}])",
       R"("required")", "tools"},
      {R"([{"type": "function", "function": {"name": "f"}}])", R"("sometimes")", "tool_choice"},
      {R"([{"type": "function", "function": {"name": "f"}}])", R"({"type": "function", "function": {"name": "g"}})",
       "tool_choice.function.name"},
      {R"([])", R"("required")", "tool_choice"},
  };
  for (const auto& [tools, choice, param] : cases) {
    auto r = parse_tool_request(ordered_json::parse(tools), ordered_json::parse(choice), true);
    ASSERT_FALSE(r) << tools << " " << choice;
    EXPECT_EQ(r.error().param, param) << r.error().message;
  }
  EXPECT_EQ(request(nullptr).choice, ToolChoice::kAuto);
  EXPECT_EQ(parse_tool_request(ordered_json::array(), nullptr, true)->choice, ToolChoice::kNone);
  EXPECT_EQ(request(nullptr).forced, nullptr) << "auto: free output";
}

TEST(ToolCalls, ForcedSchemasAcceptExactlyTheCalls) {
  const ToolRequest named =
      request(ordered_json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  ASSERT_NE(named.forced, nullptr);
  EXPECT_TRUE(is_instance(*named.forced, R"({"city":"Oslo","unit":"c"})"));
  EXPECT_TRUE(is_instance(*named.forced, R"({"city":"Oslo"})"));
  EXPECT_FALSE(is_instance(*named.forced, R"({"city":"Oslo","unit":"k"})")) << "the $ref'd enum holds";
  const ToolRequest required = request("required");
  ASSERT_NE(required.forced, nullptr);
  EXPECT_TRUE(is_instance(*required.forced, R"([{"name":"get_weather","parameters":{"city":"Rome","unit":"f"}}])"))
      << "the $ref moved with its parameters";
  EXPECT_TRUE(is_instance(*required.forced, R"([{"name":"now","parameters":{}},{"name":"now","parameters":{}}])"));
  EXPECT_FALSE(is_instance(*required.forced, R"([])"));
  EXPECT_FALSE(is_instance(*required.forced, R"([{"name":"other","parameters":{}}])"));
  const ToolRequest single = request("required", /*parallel=*/false);
  EXPECT_FALSE(is_instance(*single.forced, R"([{"name":"now","parameters":{}},{"name":"now","parameters":{}}])"));
}

TEST(ToolCalls, OutputsInTheTemplatesFormatsReadBackIntoCalls) {
  const ToolRequest automatic = request(nullptr);
  ToolCallIds ids(7, false);
  const auto read = [&](const std::string& text) { return read_tool_calls(text, automatic, ids); };
  const auto hermes = read(
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(hermes.tool_calls.size(), 2u);
  EXPECT_EQ(hermes.content, "Let me look.");
  EXPECT_EQ(hermes.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(hermes.tool_calls[0]["function"]["arguments"], R"({"city":"Oslo"})");
  EXPECT_EQ(hermes.tool_calls[0]["type"], "function");
  EXPECT_EQ(hermes.tool_calls[0]["id"].get<std::string>().substr(0, 5), "call_");
  EXPECT_NE(hermes.tool_calls[0]["id"], hermes.tool_calls[1]["id"]);
  const auto mistral = read(R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}])");
  ASSERT_EQ(mistral.tool_calls.size(), 1u);
  EXPECT_FALSE(mistral.content.has_value());
  const auto llama = read(R"( {"name": "get_weather", "parameters": {"city": "Lima"}} )");
  ASSERT_EQ(llama.tool_calls.size(), 1u);
  EXPECT_EQ(llama.tool_calls[0]["function"]["arguments"], R"({"city":"Lima"})");
  EXPECT_EQ(read(R"(<|python_tag|>{"name": "now", "parameters": {}})").tool_calls.size(), 1u);
  // Not calls: an unknown function, broken JSON, plain text, JSON that is no call.
  for (const std::string text : {R"({"name": "launch", "arguments": {}})", "<tool_call>{\"name\": \"now\"",
                                 "It is sunny.", R"({"city": "Oslo"})"}) {
    const auto out = read(text);
    EXPECT_TRUE(out.tool_calls.empty()) << text;
    EXPECT_EQ(out.content, text);
  }
  // Forced outputs: the named function's arguments, `required`'s array.
  ToolCallIds nine(1, true);
  const ToolRequest named = request(ordered_json::parse(R"({"type": "function", "function": {"name": "now"}})"));
  const auto n = read_tool_calls("{ }", named, nine);
  ASSERT_EQ(n.tool_calls.size(), 1u);
  EXPECT_EQ(n.tool_calls[0]["function"]["name"], "now");
  EXPECT_EQ(n.tool_calls[0]["function"]["arguments"], "{}");
  EXPECT_EQ(n.tool_calls[0]["id"].get<std::string>().size(), 9u) << "Mistral's ids";
  const auto r = read_tool_calls(R"([{"name":"now","parameters":{}},{"name":"get_weather","parameters":{"city":"A"}}])",
                                 request("required"), ids);
  EXPECT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(read_tool_calls("<tool_call>", request("none"), ids).content, "<tool_call>") << "none: never calls";
}

TEST(ToolCalls, StreamedContentGoesOutAndPossibleCallsAreHeldBack) {
  const ToolRequest automatic = request(nullptr);
  ToolCallIds ids(3, false);
  ToolCallStream text(automatic);
  EXPECT_EQ(text.push("Hello"), "Hello");
  EXPECT_EQ(text.push(" there <tool"), " there ") << "a marker's start waits";
  EXPECT_EQ(text.push("box>"), "<toolbox>") << "not a marker after all";
  EXPECT_FALSE(text.finish(ids).content.has_value());
  ToolCallStream call(automatic);
  EXPECT_EQ(call.push("Checking. "), "Checking. ");
  EXPECT_EQ(call.push("<tool_call>{\"name\": \"now\", "), "");
  EXPECT_EQ(call.push("\"arguments\": {}}</tool_call>"), "");
  const auto done = call.finish(ids);
  EXPECT_EQ(done.tool_calls.size(), 1u);
  ToolCallStream bare(automatic);
  EXPECT_EQ(bare.push("  {\"name\": \"now\""), "") << "a JSON start may be a bare call";
  EXPECT_EQ(bare.push(", \"parameters\": {}}"), "");
  EXPECT_EQ(bare.finish(ids).tool_calls.size(), 1u);
  ToolCallStream not_a_call(automatic);
  EXPECT_EQ(not_a_call.push("{\"x\": 1}"), "");
  const auto plain = not_a_call.finish(ids);
  EXPECT_TRUE(plain.tool_calls.empty());
  EXPECT_EQ(plain.content, "{\"x\": 1}") << "held back, then sent as content";
}

}  // namespace
}  // namespace kvs::server
