// Files whose math the forward passes do not implement are refused with the key or tensor named, never run
// approximately: RoPE scaling, biases (qwen2), granite's multipliers, experts, attention soft-capping.
#include "model/model_support.h"

#include <gtest/gtest.h>

#include <functional>

#include "model/decoder_model.h"
#include "model/gguf.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

// A tiny synthetic llama file rewritten with `edit` applied to a writer holding all its metadata and tensors.
std::string rewritten_model(const test::TempDir& dir, const std::function<void(gguf::Writer&)>& edit) {
  const std::string plain = dir.file("plain.gguf"), edited = dir.file("edited.gguf");
  EXPECT_TRUE(write_synth_model({.layers = 2, .dim = 64, .heads = 4, .kv_heads = 2, .ffn = 128}, plain));
  auto file = gguf::File::open(plain);
  EXPECT_TRUE(file) << file.status().message();
  gguf::Writer w;
  for (const auto& [key, value] : file->metadata()) w.set(key, value);
  for (const gguf::TensorInfo& t : file->tensors()) {
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.dims, {t.data.begin(), t.data.end()}));
  }
  edit(w);
  EXPECT_TRUE(w.write(edited));
  return edited;
}

// Loading fails as unimplemented, and the message names `must_mention`.
void expect_refused(const std::string& path, const std::string& must_mention) {
  auto model = DecoderModel::load(path);
  ASSERT_FALSE(model) << "loaded a file with " << must_mention;
  EXPECT_EQ(model.status().code(), ErrorCode::kUnimplemented) << model.status().message();
  EXPECT_NE(model.status().message().find(must_mention), std::string::npos) << model.status().message();
}

std::vector<std::byte> zeros(size_t floats) { return std::vector<std::byte>(floats * sizeof(float)); }

TEST(LlamaSupport, PlainLlamaLoadsAndNeutralKeysAreAccepted) {
  test::TempDir dir("llama_support_plain");
  const std::string path = rewritten_model(dir, [](gguf::Writer& w) {
    w.set_string("llama.rope.scaling.type", "none");
    w.set_f32("llama.rope.scaling.factor", 1.0f);
    w.set_u32("llama.expert_count", 0);
    w.set_u32("llama.attention.value_length", 16);     // = head dim 64 / 4
    w.set_u32("llama.attention.sliding_window", 512);  // the whole context
  });
  auto model = DecoderModel::load(path);
  EXPECT_TRUE(model) << model.status().message();
}

TEST(LlamaSupport, RopeScalingIsRefused) {
  test::TempDir dir("llama_support_rope");
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_string("llama.rope.scaling.type", "linear"); }),
                 "llama.rope.scaling.type");
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_f32("llama.rope.scaling.factor", 8.0f); }),
                 "RoPE scaling");
  expect_refused(
      rewritten_model(
          dir, [](gguf::Writer& w) { EXPECT_TRUE(w.add_tensor("rope_freqs.weight", DType::kF32, {8}, zeros(8))); }),
      "rope_freqs.weight");
}

// Mistral 7B v0.1's sliding window is on every layer: read as such, not refused.
TEST(LlamaSupport, ASlidingWindowShorterThanTheContextWindowsEveryLayer) {
  test::TempDir dir("llama_support_window");
  auto model = DecoderModel::load(
      rewritten_model(dir, [](gguf::Writer& w) { w.set_u32("llama.attention.sliding_window", 128); }));
  ASSERT_TRUE(model) << model.status().message();
  EXPECT_EQ((*model)->config().layer_windows, std::vector<uint32_t>(2, 128));
  EXPECT_EQ((*model)->config().window_of(1), 128u);
}

TEST(LlamaSupport, BiasesExpertsAndUnknownKeysAreRefused) {
  test::TempDir dir("llama_support_other");
  expect_refused(
      rewritten_model(
          dir, [](gguf::Writer& w) { EXPECT_TRUE(w.add_tensor("blk.0.attn_q.bias", DType::kF32, {64}, zeros(64))); }),
      "blk.0.attn_q.bias");
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_u32("llama.expert_count", 8); }),
                 "mixture of experts");
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_f32("llama.attention.logit_softcapping", 50); }),
                 "llama.attention.logit_softcapping");
  expect_refused(
      rewritten_model(
          dir, [](gguf::Writer& w) { EXPECT_TRUE(w.add_tensor("blk.7.attn_q.weight", DType::kF32, {64}, zeros(64))); }),
      "blk.7.attn_q.weight");  // a layer the file does not have
}

// qwen2 and granite carry the llama tensors plus math (biases, multipliers) the forward pass does not do.
TEST(LlamaSupport, LookalikeArchitecturesAreRefused) {
  test::TempDir dir("llama_support_arch");
  for (const char* arch : {"qwen2", "granite"}) {
    expect_refused(rewritten_model(dir, [&](gguf::Writer& w) { w.set_string("general.architecture", arch); }),
                   std::string("architecture '") + arch + "'");
  }
}

}  // namespace
}  // namespace kvs
