// Chat messages -> prompt text, for the common chat-template families found in GGUF files
// (`tokenizer.chat_template`). There is no Jinja engine: the family is detected by marker
// substrings of the template and each family's format is written out here in C++.
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
// BOS at the very start is not part of the text: the caller encodes with the tokenizer's add_bos
// setting and special-token parsing on.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::server {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
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
  // The prompt for `messages` followed by the assistant's turn header (add_generation_prompt).
  std::string apply(std::span<const ChatMessage> messages) const;
  // Text that ends the assistant's turn when the model writes it out as text (for Plain, the
  // start of a new user turn).
  std::vector<std::string> stop_strings() const;

 private:
  ChatTemplate(ChatTemplateFamily family, std::string bos_text, std::string eos_text)
      : family_(family), bos_(std::move(bos_text)), eos_(std::move(eos_text)) {}
  std::string apply_llama2(std::span<const ChatMessage> messages) const;
  std::string apply_system_merged(std::span<const ChatMessage> messages) const;  // Mistral, Gemma

  ChatTemplateFamily family_;
  std::string bos_;
  std::string eos_;
};

}  // namespace kvs::server
