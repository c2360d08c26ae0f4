// Each chat-template family's formatting, and detection from template sources.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

namespace kvs::chat {
namespace {

const std::vector<ChatMessage> kDialog = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

TEST(ChatTemplate, DetectsFamiliesByMarkers) {
  const auto family = [](std::string_view source) { return ChatTemplate::detect(source, "<s>", "</s>").family(); };
  EXPECT_EQ(family(""), ChatTemplateFamily::kPlain);
  EXPECT_EQ(family("{% for m in messages %}{{ m.content }}{% endfor %}"), ChatTemplateFamily::kPlain);
  EXPECT_EQ(family("{{'<|im_start|>' + message['role'] + '\\n'}}"), ChatTemplateFamily::kChatMl);
  EXPECT_EQ(family("<|start_header_id|>{{ role }}<|end_header_id|>"), ChatTemplateFamily::kLlama3);
  EXPECT_EQ(family("[INST] <<SYS>>\\n{{ system }}\\n<</SYS>>"), ChatTemplateFamily::kLlama2);
  EXPECT_EQ(family("{{ bos_token }}[INST] {{ content }} [/INST]"), ChatTemplateFamily::kMistral);
  EXPECT_EQ(family("<|user|>\\n{{ content }}{{ eos_token }}"), ChatTemplateFamily::kZephyr);
  EXPECT_EQ(family("<|user|>\\n{{ content }}<|end|>"), ChatTemplateFamily::kPhi3);
  EXPECT_EQ(family("<start_of_turn>user\\n"), ChatTemplateFamily::kGemma);
}

TEST(ChatTemplate, ChatMl) {
  EXPECT_EQ(ChatTemplate::of(ChatTemplateFamily::kChatMl).apply(kDialog).value(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3TrimsContent) {
  const std::vector<ChatMessage> messages = {{"user", "  Hi \n"}};
  EXPECT_EQ(ChatTemplate::of(ChatTemplateFamily::kLlama3).apply(messages).value(),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2PutsSystemInFirstInstruction) {
  EXPECT_EQ(ChatTemplate::of(ChatTemplateFamily::kLlama2).apply(kDialog).value(),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]");
}

TEST(ChatTemplate, MistralMergesSystemIntoFirstUserTurn) {
  EXPECT_EQ(ChatTemplate::of(ChatTemplateFamily::kMistral).apply(kDialog).value(),
            "[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Bye [/INST]");
}

TEST(ChatTemplate, ZephyrUsesTheModelsEos) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(ChatTemplate::of(ChatTemplateFamily::kZephyr, "<s>", "<|endoftext|>").apply(messages).value(),
            "<|user|>\nHi<|endoftext|>\n<|assistant|>\n");
  EXPECT_EQ(ChatTemplate::of(ChatTemplateFamily::kPhi3).apply(messages).value(),
            "<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplate, GemmaHasNoSystemRoleAndCallsTheAssistantModel) {
  EXPECT_EQ(ChatTemplate::of(ChatTemplateFamily::kGemma).apply(kDialog).value(),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, PlainFallbackAndItsStop) {
  const ChatTemplate plain = ChatTemplate::of(ChatTemplateFamily::kPlain);
  EXPECT_EQ(plain.apply(kDialog).value(), "System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: Bye\nAssistant:");
  EXPECT_EQ(plain.stop_strings(), std::vector<std::string>{"\nUser:"});
  EXPECT_EQ(plain.name(), "plain");
}

}  // namespace
}  // namespace kvs::chat
