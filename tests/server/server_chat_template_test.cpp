// The model's own chat template behind the server: a synthetic model carrying a real template
// (tests/jinja/templates, written by `synth --chat-template`) renders chat messages as Jinja2 does
// (tests/jinja/expected), POST /apply-template shows that prompt, a chat completion is computed on exactly
// its tokens, a template's refusal (Gemma's "System role not supported") is a 400 with its message, and
// `serve --chat-template FILE` replaces the file's template. Tools: a request's tools and an assistant's calls and
// the tool's answer render through the template as Jinja2 renders them, a required call comes back as
// message.tool_calls of a requested function with arguments valid for its parameters, and the round trip (call,
// result, answer) runs.
#include <gtest/gtest.h>

#include <csignal>
#include <nlohmann/json.hpp>

#include "server_process.h"
#include "test_support.h"

namespace kvs::test {
namespace {

using nlohmann::json;

const std::string kTemplates = std::string(KVS_SOURCE_DIR) + "/tests/jinja/";

std::string synth_with_template(const TempDir& dir, const std::string& template_name) {
  const std::string model = dir.file(template_name + ".gguf");
  const std::string cmd = std::string("'") + KVS_BINARY + "' synth --preset tiny-qwen2 --chat-template '" + kTemplates +
                          "templates/" + template_name + ".jinja' -o '" + model + "' > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return model;
}

json conversation(const std::string& name) {
  return json::parse(read_file(kTemplates + "conversations.json"))[name]["messages"];
}

TEST(ServerChatTemplate, TheModelsTemplateRendersAsJinja2AndTheChatRunsOnIt) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_chat_template");
  const std::string qwen = "Qwen-Qwen2.5-7B-Instruct";
  ServerProcess server(dir, {"-m", synth_with_template(dir, qwen)});
  ASSERT_TRUE(server.started()) << server.stderr_text();
  EXPECT_NE(server.stdout_text().find("chat template jinja (the model's)"), std::string::npos);
  auto client = server.client();
  for (const std::string name : {"user", "system", "multi_turn", "unicode"}) {
    SCOPED_TRACE(name);
    const json messages = conversation(name);
    const auto applied = post_json(client, "/apply-template", json{{"messages", messages}}.dump());
    ASSERT_EQ(applied.status, 200) << applied.body;
    const std::string expected = read_file(kTemplates + "expected/" + qwen + "." + name + ".txt");
    EXPECT_EQ(applied.json()["prompt"], expected);
    // The chat request's prompt is that text's tokens: as many as a completion of it counts.
    const auto chat = post_json(client, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}}.dump());
    const auto plain = post_json(client, "/v1/completions", json{{"prompt", expected}, {"max_tokens", 1}}.dump());
    ASSERT_EQ(chat.status, 200) << chat.body;
    ASSERT_EQ(plain.status, 200) << plain.body;
    EXPECT_EQ(chat.json()["usage"]["prompt_tokens"], plain.json()["usage"]["prompt_tokens"]);
  }
  EXPECT_EQ(get(client, "/v1/models").json()["data"][0]["chat_template"], "jinja");
  EXPECT_EQ(server.terminate(), 0);
}

TEST(ServerChatTemplate, ATemplatesRefusalIsA400AndAFileTemplateReplacesTheModels) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_chat_template_refusal");
  const std::string gemma = "google-gemma-7b-it";
  const std::string model = synth_with_template(dir, gemma);
  {
    ServerProcess server(dir, {"-m", model});
    ASSERT_TRUE(server.started()) << server.stderr_text();
    auto client = server.client();
    const auto refused =
        post_json(client, "/v1/chat/completions", json{{"messages", conversation("system")}, {"max_tokens", 1}}.dump());
    EXPECT_EQ(refused.status, 400);
    EXPECT_EQ(refused.json()["error"]["param"], "messages");
    EXPECT_NE(refused.json()["error"]["message"].get<std::string>().find("System role not supported"),
              std::string::npos)
        << refused.body;
    const auto accepted =
        post_json(client, "/v1/chat/completions", json{{"messages", conversation("user")}, {"max_tokens", 1}}.dump());
    EXPECT_EQ(accepted.status, 200) << accepted.body;
    EXPECT_EQ(server.terminate(), 0);
  }
  // --chat-template: ChatML from a file instead of the model's Gemma template.
  const std::string chatml = "teknium-OpenHermes-2.5-Mistral-7B-chatml";
  TempDir second("server_chat_template_file");
  ServerProcess server(second, {"-m", model, "--chat-template", kTemplates + "templates/" + chatml + ".jinja"});
  ASSERT_TRUE(server.started()) << server.stderr_text();
  auto client = server.client();
  const auto applied = post_json(client, "/apply-template", json{{"messages", conversation("system")}}.dump());
  ASSERT_EQ(applied.status, 200) << applied.body;
  EXPECT_EQ(applied.json()["prompt"], read_file(kTemplates + "expected/" + chatml + ".system.txt"));
  EXPECT_EQ(server.terminate(), 0);
}

// The OpenAI form of conversations.json's tool round trip: arguments as JSON text. (Ordered JSON: the tools' keys
// stay in the order the template is expected to print them.)
using ordered_json = nlohmann::ordered_json;
ordered_json openai_messages(ordered_json messages) {
  for (ordered_json& m : messages)
    if (m.contains("tool_calls"))
      for (ordered_json& call : m["tool_calls"]) call["function"]["arguments"] = call["function"]["arguments"].dump();
  return messages;
}

TEST(ServerChatTemplate, ToolsAndToolCallsRenderThroughTheTemplateAndACallComesBack) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_chat_template_tools");
  const std::string qwen = "Qwen-Qwen2.5-7B-Instruct";
  const std::string model = dir.file("qwen.gguf");
  const std::string cmd = std::string("'") + KVS_BINARY + "' synth --preset tiny-qwen2 --ctx 4096 --chat-template '" +
                          kTemplates + "templates/" + qwen + ".jinja' -o '" + model + "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ServerProcess server(dir, {"-m", model});
  ASSERT_TRUE(server.started()) << server.stderr_text();
  auto client = server.client();
  const ordered_json spec = ordered_json::parse(read_file(kTemplates + "conversations.json"));
  for (const std::string name : {"tools", "tool_round_trip"}) {
    const ordered_json body = {{"messages", openai_messages(spec[name]["messages"])}, {"tools", spec[name]["tools"]}};
    const auto applied = post_json(client, "/apply-template", body.dump());
    ASSERT_EQ(applied.status, 200) << applied.body;
    EXPECT_EQ(applied.json()["prompt"], read_file(kTemplates + "expected/" + qwen + "." + name + ".txt")) << name;
  }
  // tool_choice required: a call of get_weather with a string city, whatever the random model would write.
  json messages = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
  const json tools = json::parse(spec["tools"]["tools"].dump());
  for (const uint64_t seed : {1, 2, 3}) {
    const json request = {{"messages", messages}, {"tools", tools}, {"tool_choice", "required"},
                          {"max_tokens", 200},    {"seed", seed},   {"parallel_tool_calls", false}};
    const auto r = post_json(client, "/v1/chat/completions", request.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.json()["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.body;
    EXPECT_TRUE(choice["message"]["content"].is_null());
    const json call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    const json args = json::parse(call["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(args["city"].is_string()) << args;
    if (args.contains("unit")) {
      EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << args;
    }
    if (seed == 1) {  // the round trip: the call and its result go back; the answer is text
      messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}});
      messages.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "{\"temperature\": 21}"}});
    }
  }
  const auto answer = post_json(
      client, "/v1/chat/completions",
      json{{"messages", messages}, {"tools", tools}, {"tool_choice", "none"}, {"max_tokens", 8}, {"seed", 4}}.dump());
  ASSERT_EQ(answer.status, 200) << answer.body;
  const json answered = answer.json()["choices"][0];
  EXPECT_TRUE(answered["finish_reason"] == "length" || answered["finish_reason"] == "stop") << answer.body;
  EXPECT_TRUE(answered["message"]["content"].is_string());
  EXPECT_FALSE(answered["message"].contains("tool_calls")) << "none: text only";
  const auto prompt = post_json(client, "/apply-template", json{{"messages", messages}, {"tools", tools}}.dump());
  EXPECT_NE(prompt.json()["prompt"].get<std::string>().find("<tool_response>\n{\"temperature\": 21}\n</tool_response>"),
            std::string::npos)
      << prompt.body;
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace kvs::test
