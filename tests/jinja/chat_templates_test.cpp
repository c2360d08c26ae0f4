// The chat templates real models carry (tests/jinja/templates: Llama 2, 3, 3.1, 3.2, 3.3, Mistral 7B v0.2, Nemo,
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

#include "jinja/jinja_template.h"

namespace kvs::jinja {
namespace {

const std::filesystem::path kDir = std::filesystem::path(KVS_SOURCE_DIR) / "tests" / "jinja";

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// strftime_now's instant in render_with_jinja2.py: 2024-07-26 12:00:00 UTC.
RenderOptions fixed_clock() { return {.now = std::chrono::system_clock::from_time_t(1721995200)}; }

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

// Each feature the subset has (whitespace control, loops and their scoping, macros, call and filter blocks, values
// printed as Python prints them, operators, string and dict methods, slices, tojson, filters, tests, globals),
// against Jinja2's renderings of snippets.json.
TEST(ChatTemplates, SnippetsRenderAsJinja2Does) {
  const auto snippets = nlohmann::ordered_json::parse(read(kDir / "snippets.json"));
  for (const auto& [name, spec] : snippets.items()) {
    SCOPED_TRACE(name);
    auto parsed = Template::parse(spec["template"].get<std::string>());
    ASSERT_TRUE(parsed) << parsed.status().message();
    Object variables;
    for (const auto& [key, value] : spec["variables"].items()) variables.emplace_back(key, Value::from_json(value));
    const auto rendered = parsed->render(variables, fixed_clock());
    const auto expected = kDir / "expected" / ("snippet." + name);
    if (std::filesystem::exists(expected.string() + ".error")) {
      ASSERT_FALSE(rendered);
      EXPECT_EQ(rendered.status().message(), read(expected.string() + ".error"));
      continue;
    }
    ASSERT_TRUE(rendered) << rendered.status().message();
    EXPECT_EQ(*rendered, read(expected.string() + ".txt"));
  }
}

// What the subset does not have is refused when the template is parsed, naming it and its line; malformed
// templates say where.
TEST(ChatTemplates, UnsupportedOrMalformedTemplatesAreRefusedWithTheirLine) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"a\n{{ x | frobnicate }}", "line 2: the filter 'frobnicate' is not supported"},
      {"{% if x is prime %}{% endif %}", "the test 'prime' is not supported"},
      {"{% include 'other.jinja' %}", "unknown or unsupported tag 'include'"},
      {"{% for x in y %}\n\n{{ x }}", "a block is not closed: expected '{% endfor %}'"},
      {"{{ 'unterminated }}", "a string literal is not closed"},
      {"\n\n{% endif %}", "line 3: 'endif' without its opening tag"},
      {"{{ a b }}", "expected '}}', found 'b'"},
  };
  std::string deep_brackets = "{{ ", deep_blocks;
  for (int i = 0; i < 300; ++i) deep_brackets += "(";
  deep_brackets += "1";
  for (int i = 0; i < 300; ++i) deep_brackets += ")";
  deep_brackets += " }}";
  for (int i = 0; i < 300; ++i) deep_blocks += "{% if 1 %}";
  cases.emplace_back(deep_brackets, "brackets nest deeper than 200");
  cases.emplace_back(deep_blocks, "blocks nest deeper than 200");
  for (const auto& [source, message] : cases) {
    auto parsed = Template::parse(source);
    ASSERT_FALSE(parsed) << source;
    EXPECT_NE(parsed.status().message().find(message), std::string::npos) << parsed.status().message();
  }
  // A template is untrusted input: unbounded recursion and huge repetitions are errors, not crashes.
  for (const auto& [source, message] : std::vector<std::pair<std::string, std::string>>{
           {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "deeper than 100 levels"},
           {"{{ range(10000000000) | length }}", "more than 1000000 items"},
           {"{{ 'ab' * 100000000000 }}", "repetition of more than"},
           {"{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
            "loops ran more than 10000000 times"},
           {"{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}", "the output passed"},
           {"{{ nothing | dictsort }}", "dictsort expects a dict, got Undefined"},
           {"{{ 'a b'.split(5) }}", "must be str or None, not int"}}) {
    auto t = Template::parse(source);
    ASSERT_TRUE(t) << source;
    auto r = t->render({});
    ASSERT_FALSE(r) << source;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  }
  // Errors while rendering name the line too.
  auto t = Template::parse("ok\n{{ 1 + 'a' }}");
  ASSERT_TRUE(t);
  auto r = t->render({});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "template error at line 2: unsupported operand type(s) for +: 'int' and 'str'");
}

}  // namespace
}  // namespace kvs::jinja
