#include "chat/chat_template.h"

namespace kvs::chat {
namespace {

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

std::string plain_role(std::string_view role) {
  if (role == "system") return "System";
  if (role == "assistant") return "Assistant";
  return "User";
}

}  // namespace

ChatTemplate ChatTemplate::detect(std::string_view source, std::string bos_text, std::string eos_text) {
  ChatTemplateFamily family = ChatTemplateFamily::kPlain;
  if (contains(source, "<|im_start|>")) {
    family = ChatTemplateFamily::kChatMl;
  } else if (contains(source, "<|start_header_id|>")) {
    family = ChatTemplateFamily::kLlama3;
  } else if (contains(source, "<start_of_turn>")) {
    family = ChatTemplateFamily::kGemma;
  } else if (contains(source, "[INST]")) {
    family = contains(source, "<<SYS>>") ? ChatTemplateFamily::kLlama2 : ChatTemplateFamily::kMistral;
  } else if (contains(source, "<|user|>")) {
    family = contains(source, "<|end|>") ? ChatTemplateFamily::kPhi3 : ChatTemplateFamily::kZephyr;
  }
  ChatTemplate t(family, std::move(bos_text), std::move(eos_text));
  t.nine_character_ids_ = contains(source, "[TOOL_CALLS]") || contains(source, "length != 9");
  if (!source.empty()) {
    auto parsed = jinja::Template::parse(source);
    if (parsed) {
      t.jinja_ = std::make_shared<const jinja::Template>(std::move(*parsed));
    } else {
      t.template_error_ = parsed.status().message();
    }
  }
  return t;
}

ChatTemplate ChatTemplate::of(ChatTemplateFamily family, std::string bos_text, std::string eos_text) {
  return ChatTemplate(family, std::move(bos_text), std::move(eos_text));
}

std::string_view ChatTemplate::name() const {
  switch (family_) {
    case ChatTemplateFamily::kPlain: return "plain";
    case ChatTemplateFamily::kChatMl: return "chatml";
    case ChatTemplateFamily::kLlama2: return "llama2";
    case ChatTemplateFamily::kLlama3: return "llama3";
    case ChatTemplateFamily::kMistral: return "mistral";
    case ChatTemplateFamily::kZephyr: return "zephyr";
    case ChatTemplateFamily::kPhi3: return "phi3";
    case ChatTemplateFamily::kGemma: return "gemma";
  }
  return "plain";
}

std::vector<std::string> ChatTemplate::stop_strings() const {
  switch (family_) {
    case ChatTemplateFamily::kPlain: return {"\nUser:"};
    case ChatTemplateFamily::kChatMl: return {"<|im_end|>"};
    case ChatTemplateFamily::kLlama3: return {"<|eot_id|>"};
    case ChatTemplateFamily::kPhi3: return {"<|end|>"};
    case ChatTemplateFamily::kGemma: return {"<end_of_turn>"};
    case ChatTemplateFamily::kLlama2:
    case ChatTemplateFamily::kMistral:
    case ChatTemplateFamily::kZephyr: return {};  // their turns end with EOS, which stops anyway
  }
  return {};
}

Expected<std::string> ChatTemplate::apply(std::span<const ChatMessage> messages,
                                          const nlohmann::ordered_json& tools) const {
  const bool has_tools = tools.is_array() && !tools.empty();
  if (!jinja_) {
    if (!has_tools) return apply_family(messages);
    return apply_family(with_tools_as_text(messages, tools));
  }
  jinja::Array list;
  for (const ChatMessage& m : messages) {
    jinja::Object message = {{"role", jinja::Value(m.role)},
                             {"content", m.null_content ? jinja::Value::none() : jinja::Value(m.content)}};
    if (m.tool_calls.is_array()) message.emplace_back("tool_calls", jinja::Value::from_json(m.tool_calls));
    if (m.role == "tool") message.emplace_back("tool_call_id", jinja::Value(m.tool_call_id));
    if (!m.name.empty()) message.emplace_back("name", jinja::Value(m.name));
    list.push_back(jinja::Value(std::move(message)));
  }
  const jinja::Object variables = {{"messages", jinja::Value(std::move(list))},
                                   {"tools", has_tools ? jinja::Value::from_json(tools) : jinja::Value::none()},
                                   {"documents", jinja::Value::none()},
                                   {"add_generation_prompt", jinja::Value(true)},
                                   {"bos_token", jinja::Value(bos_)},
                                   {"eos_token", jinja::Value(eos_)}};
  auto text = jinja_->render(variables);
  if (!text)
    return Status::invalid_argument("the model's chat template refused the messages: " + text.status().message());
  return text;
}

// For the families written out in C++: the tools described in a system message, calls and results as text.
std::vector<ChatMessage> ChatTemplate::with_tools_as_text(std::span<const ChatMessage> messages,
                                                          const nlohmann::ordered_json& tools) {
  std::string described =
      "You can call these functions. To call one, answer with only a JSON object {\"name\": <the function's name>, "
      "\"arguments\": <an object of its arguments>}.\n";
  for (const auto& tool : tools) described.append("\n").append(tool["function"].dump());
  std::vector<ChatMessage> out;
  if (messages.empty() || messages[0].role != "system") out.push_back({.role = "system", .content = described});
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    ChatMessage text{.role = m.role, .content = m.content};
    if (i == 0 && m.role == "system") text.content.append("\n\n").append(described);
    if (m.tool_calls.is_array()) {
      for (const auto& call : m.tool_calls) {
        if (!text.content.empty()) text.content += '\n';
        text.content +=
            nlohmann::ordered_json{{"name", call["function"]["name"]}, {"arguments", call["function"]["arguments"]}}
                .dump();
      }
    }
    if (m.role == "tool") {
      text.role = "user";
      text.content = "The result of " + (m.name.empty() ? m.tool_call_id : m.name) + ": " + m.content;
    }
    out.push_back(std::move(text));
  }
  return out;
}

std::string ChatTemplate::apply_family(std::span<const ChatMessage> messages) const {
  std::string out;
  switch (family_) {
    case ChatTemplateFamily::kChatMl:
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      return out + "<|im_start|>assistant\n";
    case ChatTemplateFamily::kLlama3:
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
        out += trim(m.content);
        out += "<|eot_id|>";
      }
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatTemplateFamily::kZephyr:
    case ChatTemplateFamily::kPhi3: {
      const std::string end = family_ == ChatTemplateFamily::kPhi3 ? "<|end|>" : eos_;
      for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + end + "\n";
      return out + "<|assistant|>\n";
    }
    case ChatTemplateFamily::kLlama2: return apply_llama2(messages);
    case ChatTemplateFamily::kMistral:
    case ChatTemplateFamily::kGemma: return apply_system_merged(messages);
    case ChatTemplateFamily::kPlain:
      for (const ChatMessage& m : messages) out += plain_role(m.role) + ": " + m.content + "\n";
      return out + "Assistant:";
  }
  return out;
}

// Meta's template: the system prompt sits in <<SYS>> inside the first [INST]; every user turn
// after the first starts with BOS, every answer ends with EOS.
std::string ChatTemplate::apply_llama2(std::span<const ChatMessage> messages) const {
  std::string out, system;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system += std::string(system.empty() ? "" : "\n") + m.content;
    } else if (m.role == "user") {
      std::string content(trim(m.content));
      if (!system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      system.clear();
      out += (first_user ? "" : bos_) + "[INST] " + content + " [/INST]";
      first_user = false;
    } else {
      out.append(" ").append(trim(m.content)).append(" ").append(eos_);
    }
  }
  return out;
}

// Families without a system role: system text joins the next user turn, separated by a blank line.
std::string ChatTemplate::apply_system_merged(std::span<const ChatMessage> messages) const {
  const bool gemma = family_ == ChatTemplateFamily::kGemma;
  std::string out, system;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n\n") + m.content;
      continue;
    }
    if (m.role == "user") {
      const std::string content = system.empty() ? m.content : system + "\n\n" + m.content;
      system.clear();
      out += gemma ? "<start_of_turn>user\n" + std::string(trim(content)) + "<end_of_turn>\n"
                   : "[INST] " + content + " [/INST]";
    } else {
      out += gemma ? "<start_of_turn>model\n" + std::string(trim(m.content)) + "<end_of_turn>\n" : m.content + eos_;
    }
  }
  if (!system.empty()) {  // a system message with no user turn after it
    out += gemma ? "<start_of_turn>user\n" + system + "<end_of_turn>\n" : "[INST] " + system + " [/INST]";
  }
  return gemma ? out + "<start_of_turn>model\n" : out;
}

}  // namespace kvs::chat
