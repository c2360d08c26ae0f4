// Tool calling's request half (server/tool_request.h): tools and tool_choice validated with errors that name the
// field; the forced schemas (a named function's arguments, `required`'s array of calls, $refs moved with the
// parameters they sit in) accept exactly the calls they should.
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include "grammar/json_schema.h"
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

TEST(ToolRequests, RequestsAreValidatedNamingTheField) {
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

TEST(ToolRequests, ForcedSchemasAcceptExactlyTheCalls) {
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

}  // namespace
}  // namespace kvs::server
