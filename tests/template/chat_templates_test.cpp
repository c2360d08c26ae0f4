// The chat templates real models carry (tests/template/templates: Llama 2, 3, 3.1, 3.2, 3.3, Mistral 7B v0.2, Nemo,
// Large 2411, Small 3.2, Qwen 2.5, Qwen 3, QwQ, Gemma 7B, 2, 3, DeepSeek V2, R1, V3.1, Coder, Phi-3, Phi-3.5,
// ChatML, Hermes 3 with tools, Granite 3.3), rendered for every conversation of conversations.json (system prompts,
// multi-turn, unicode, tools, a tool call round trip) and compared byte for byte with what Jinja2 renders as
// Hugging Face does (expected/, written by render_with_jinja2.py); where Jinja2 refuses the conversation (a
// raise_exception), the same message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "template/jinja_template.h"

namespace kvs::jinja {
namespace {

const std::filesystem::path kDir = std::filesystem::path(KVS_SOURCE_DIR) / "tests" / "template";

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// strftime_now's instant in render_with_jinja2.py: 2024-07-26 12:00:00 UTC.
RenderOptions fixed_clock() {
  return {.now = std::chrono::system_clock::from_time_t(1721995200)};
}

TEST(ChatTemplates, RenderEveryCollectedTemplateAsJinja2Does) {
  const auto tokens = nlohmann::ordered_json::parse(read(kDir / "templates.json"));
  const auto conversations = nlohmann::ordered_json::parse(read(kDir / "conversations.json"));
  size_t compared = 0, refusals = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDir / "templates")) {
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    auto parsed = Template::parse(read(entry.path()));
    ASSERT_TRUE(parsed) << parsed.status().message();
    for (const auto& [conversation, spec] : conversations.items()) {
      SCOPED_TRACE(conversation);
      Object variables = {
          {"messages", Value::from_json(spec["messages"])},
          {"tools", spec.contains("tools") ? Value::from_json(spec["tools"]) : Value::none()},
          {"documents", Value::none()},
          {"add_generation_prompt", Value(spec.value("add_generation_prompt", true))},
          {"bos_token", Value(tokens[name]["bos_token"].get<std::string>())},
          {"eos_token", Value(tokens[name]["eos_token"].get<std::string>())},
      };
      const auto rendered = parsed->render(variables, fixed_clock());
      const auto expected = kDir / "expected" / (name + "." + conversation);
      if (std::filesystem::exists(expected.string() + ".error")) {
        const std::string message = read(expected.string() + ".error");
        ASSERT_FALSE(rendered) << "Jinja2 refused it: " << message;
        if (message[0] != '!') {
          EXPECT_EQ(rendered.status().message(), message);
        }
        ++refusals;
        continue;
      }
      ASSERT_TRUE(rendered) << rendered.status().message();
      EXPECT_EQ(*rendered, read(expected.string() + ".txt"));
      ++compared;
    }
  }
  EXPECT_GE(compared, 140u);
  EXPECT_GE(refusals, 10u);
}

}  // namespace
}  // namespace kvs::jinja
