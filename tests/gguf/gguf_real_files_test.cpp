// Files written by other tools (llama.cpp) load, with the values they hold.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "gguf_test_util.h"

namespace kvs::gguf {
namespace {

using kvs::testing::shared_path;

TEST(GgufRealFiles, Stories260KFromLlamaCpp) {
  auto file = File::open(shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->data_offset(), 14176u);  // header ends at 14152
  EXPECT_EQ(file->metadata().size(), 19u);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_int("llama.context_length"), 2048);
  EXPECT_EQ(file->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(file->get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(file->get_int("llama.block_count"), 5);
  EXPECT_EQ(file->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(file->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(file->get_int("llama.rope.dimension_count"), 8);
  EXPECT_FLOAT_EQ(static_cast<float>(*file->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(file->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(file->get_int("tokenizer.ggml.seperator_token_id"), 4294967295);
  const Array* tokens = file->get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->element_type, ValueType::kString);
  ASSERT_EQ(tokens->items.size(), 512u);
  EXPECT_EQ(*tokens->items[0].as_string(), "<unk>");
  EXPECT_EQ(*tokens->items[3].as_string(), "<0x00>");
  EXPECT_EQ(*tokens->items[259].as_string(), "\xe2\x96\x81t");
  EXPECT_EQ(file->get_array("tokenizer.ggml.scores")->items[261].as_float(), -2.0);
  EXPECT_EQ(file->get_array("tokenizer.ggml.token_type")->items[0].as_int(), 2);

  ASSERT_EQ(file->tensors().size(), 48u);
  EXPECT_EQ(file->tensors()[0].name, "token_embd.weight");
  const TensorInfo* embd = file->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, DType::kF32);
  EXPECT_EQ(embd->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(embd->data.size(), 64u * 512 * 4);
  const TensorInfo* down = file->find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->dims, (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(down->offset, 1082880u);
  EXPECT_EQ(file->find_tensor("blk.0.attn_k.weight")->dims, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(file->find_tensor("output_norm.weight")->dims, (std::vector<uint64_t>{64}));

  // The embedding bytes equal the llama2.c checkpoint's (it starts after the 28-byte header).
  const std::string checkpoint = kvs::testing::read_bytes(shared_path("models/stories260K/stories260K.bin"));
  ASSERT_GT(checkpoint.size(), 28 + embd->data.size());
  EXPECT_EQ(0, std::memcmp(checkpoint.data() + 28, embd->data.data(), embd->data.size()));
}

TEST(GgufRealFiles, LlamaSpmVocab) {
  auto file = File::open(shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->tensors().size(), 0u);
  EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(file->get_array("tokenizer.ggml.tokens")->items.size(), 32000u);
  EXPECT_EQ(file->get_array("tokenizer.ggml.scores")->items.size(), 32000u);
  EXPECT_EQ(file->get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(file->get_bool("tokenizer.ggml.add_eos_token"), false);
  EXPECT_EQ(file->get_int("llama.vocab_size"), 32000);
}

TEST(GgufRealFiles, Gpt2Vocab) {
  auto file = File::open(shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf"));
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->tensors().size(), 0u);
  EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file->get_string("tokenizer.ggml.pre"), "gpt-2");
  const Array* tokens = file->get_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens->items.size(), 50257u);
  EXPECT_EQ(*tokens->items[0].as_string(), "!");
  const Array* merges = file->get_array("tokenizer.ggml.merges");
  ASSERT_EQ(merges->items.size(), 50000u);
  EXPECT_EQ(*merges->items[0].as_string(), "\xc4\xa0 t");  // "Ġ t"
  EXPECT_EQ(file->get_int("tokenizer.ggml.eos_token_id"), 50256);
}

}  // namespace
}  // namespace kvs::gguf
