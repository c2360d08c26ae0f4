// Tool calls read back from a model's output (chat/tool_calls.h): outputs in the formats chat templates teach
// (Hermes/Qwen, Mistral, Llama 3.x, bare JSON) read back into calls of offered functions, anything else staying
// content; forced outputs (a named function's arguments, `required`'s array) read as calls; streamed, content goes
// out as it comes and what may be a call is held back.
#include "chat/tool_calls.h"

#include <gtest/gtest.h>

namespace kvs::chat {
namespace {

// Two functions offered, get_weather and now, and the choice of whether and which to call.
ToolRequest offered(ToolChoice choice, std::string named = {}) {
  return {.names = {"get_weather", "now"}, .choice = choice, .named = std::move(named)};
}

TEST(ToolCalls, OutputsInTheTemplatesFormatsReadBackIntoCalls) {
  const ToolRequest automatic = offered(ToolChoice::kAuto);
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
  const ToolRequest named = offered(ToolChoice::kNamed, "now");
  const auto n = read_tool_calls("{ }", named, nine);
  ASSERT_EQ(n.tool_calls.size(), 1u);
  EXPECT_EQ(n.tool_calls[0]["function"]["name"], "now");
  EXPECT_EQ(n.tool_calls[0]["function"]["arguments"], "{}");
  EXPECT_EQ(n.tool_calls[0]["id"].get<std::string>().size(), 9u) << "Mistral's ids";
  const auto r = read_tool_calls(R"([{"name":"now","parameters":{}},{"name":"get_weather","parameters":{"city":"A"}}])",
                                 offered(ToolChoice::kRequired), ids);
  EXPECT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(read_tool_calls("<tool_call>", offered(ToolChoice::kNone), ids).content, "<tool_call>")
      << "none: never calls";
}

TEST(ToolCalls, StreamedContentGoesOutAndPossibleCallsAreHeldBack) {
  const ToolRequest automatic = offered(ToolChoice::kAuto);
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
}  // namespace kvs::chat
