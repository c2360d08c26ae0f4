// Chat messages -> prompt text. A model file's own `tokenizer.chat_template` is rendered as its authors wrote it by
// kvserve's Jinja subset (jinja/jinja_template.h), as Hugging Face's apply_chat_template does (with
// add_generation_prompt, bos_token and eos_token). A template the subset cannot parse, or none, falls back to the
// family its marker substrings name, written out here in C++:
//
//   ChatML  <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
//   Llama 3 <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> ... (assistant header)
//   Llama 2 [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] ...
//   Mistral [INST] user [/INST]answer</s>[INST] ...        (system joins the first user turn)
//   Zephyr  <|user|>\ncontent</s>\n ... <|assistant|>\n
//   Phi-3   <|user|>\ncontent<|end|>\n ... <|assistant|>\n
//   Gemma   <start_of_turn>user\ncontent<end_of_turn>\n ... <start_of_turn>model\n
//   Plain   (no or unknown template) "System: ...\nUser: ...\nAssistant: ...\nUser: ...\nAssistant:"
//
// The family also gives the stop strings. A BOS the text starts with is the caller's to drop when the tokenizer
// adds one itself (bos_text()).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "jinja/jinja_template.h"

namespace kvs::chat {

struct ChatMessage {
  std::string role = {};  // "system", "user", "assistant" or "tool"
  std::string content = {};
  bool null_content = false;  // an assistant's tool-call turn without text (content null)
  // assistant: the calls made, [{id, type, function: {name, arguments}}], arguments an object when they parse as one
  nlohmann::ordered_json tool_calls = {};
  std::string tool_call_id = {};  // tool: the call answered
  std::string name = {};          // tool: the function's name, when given
};

enum class ChatTemplateFamily { kPlain, kChatMl, kLlama2, kLlama3, kMistral, kZephyr, kPhi3, kGemma };

class ChatTemplate {
 public:
  // `source` is the Jinja text of tokenizer.chat_template ("" when the model has none); bos/eos
  // are the texts of the model's BOS and EOS tokens (what the template calls bos_token/eos_token).
  static ChatTemplate detect(std::string_view source, std::string bos_text, std::string eos_text);
  static ChatTemplate of(ChatTemplateFamily family, std::string bos_text = "<s>", std::string eos_text = "</s>");

  ChatTemplateFamily family() const { return family_; }
  std::string_view name() const;
  // The model's own template is rendered (else the family's format is written out).
  bool renders_model_template() const { return jinja_ != nullptr; }
  // Why the model's template is not rendered: the Jinja subset's parse error ("" when it is, or there is none).
  const std::string& template_error() const { return template_error_; }
  const std::string& bos_text() const { return bos_; }
  // The prompt for `messages` followed by the assistant's turn header (add_generation_prompt); an error when the
  // model's template refuses the conversation (its raise_exception message, e.g. a system role it has not).
  // `tools`: the request's tools (OpenAI's array) for the template to describe, or null. The families written out
  // in C++ describe them in a system message and write calls and results as text.
  Expected<std::string> apply(std::span<const ChatMessage> messages,
                              const nlohmann::ordered_json& tools = nlohmann::ordered_json()) const;
  // The template checks that call ids are 9 letters or digits (Mistral's): ids made for it must be.
  bool wants_nine_character_call_ids() const { return nine_character_ids_; }
  // Text that ends the assistant's turn when the model writes it out as text (for Plain, the
  // start of a new user turn).
  std::vector<std::string> stop_strings() const;

 private:
  ChatTemplate(ChatTemplateFamily family, std::string bos_text, std::string eos_text)
      : family_(family), bos_(std::move(bos_text)), eos_(std::move(eos_text)) {}
  std::string apply_family(std::span<const ChatMessage> messages) const;
  static std::vector<ChatMessage> with_tools_as_text(std::span<const ChatMessage> messages,
                                                     const nlohmann::ordered_json& tools);
  std::string apply_llama2(std::span<const ChatMessage> messages) const;
  std::string apply_system_merged(std::span<const ChatMessage> messages) const;  // Mistral, Gemma

  ChatTemplateFamily family_;
  std::string bos_;
  std::string eos_;
  std::shared_ptr<const jinja::Template> jinja_;  // the model's template, parsed
  std::string template_error_;
  bool nine_character_ids_ = false;
};

}  // namespace kvs::chat
