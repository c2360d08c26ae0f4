// Files whose math the forward passes do not implement are refused with the key or tensor named, never run
// approximately: RoPE scaling other than linear and Llama 3.1's, biases outside Q/K/V, granite's multipliers,
// experts (outside deepseek2), attention soft-capping, DeepSeek-V3's routing; malformed RoPE factors are corrupt.
#include "model/model_support.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "gguf/gguf.h"
#include "model/decoder_model.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

// A tiny synthetic file (llama unless `spec` says otherwise) rewritten with `edit` applied to a writer holding all its
// metadata and tensors.
std::string rewritten_model(const test::TempDir& dir, const std::function<void(gguf::Writer&)>& edit,
                            const SynthSpec& spec = {.layers = 2, .dim = 64, .heads = 4, .kv_heads = 2, .ffn = 128}) {
  const std::string plain = dir.file("plain.gguf"), edited = dir.file("edited.gguf");
  EXPECT_TRUE(write_synth_model(spec, plain));
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

TEST(LlamaSupport, RopeScalingOtherThanLinearOrLlama3IsRefused) {
  test::TempDir dir("llama_support_rope");
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_string("llama.rope.scaling.type", "yarn"); }),
                 "llama.rope.scaling.type");
  // A factor without the linear type says nothing the engine can do.
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_f32("llama.rope.scaling.factor", 8.0f); }),
                 "RoPE scaling");
  auto linear = DecoderModel::load(rewritten_model(dir, [](gguf::Writer& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 2.0f);
  }));
  ASSERT_TRUE(linear) << linear.status().message();
  EXPECT_EQ((*linear)->config().rope_freq_scale, 0.5f);
}

TEST(LlamaSupport, MalformedRopeFactorsAreCorrupt) {
  test::TempDir dir("llama_support_factors");
  const auto error_with = [&](std::vector<uint64_t> dims, std::vector<float> values) {
    std::vector<std::byte> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    auto model = DecoderModel::load(rewritten_model(dir, [&](gguf::Writer& w) {
      EXPECT_TRUE(w.add_tensor("rope_freqs.weight", DType::kF32, dims, std::move(bytes)));
    }));
    EXPECT_FALSE(model);
    if (model) return std::string();
    EXPECT_EQ(model.status().code(), ErrorCode::kCorrupt);
    return model.status().message();
  };
  // Head dim 16: 8 pairs.
  EXPECT_NE(error_with({4}, std::vector<float>(4, 1.0f)).find("must be f32 [8] (rope dimension 16 / 2)"),
            std::string::npos);
  std::vector<float> factors(8, 2.0f);
  factors[3] = 0.0f;
  EXPECT_NE(error_with({8}, factors).find("rope_freqs.weight[3] = 0 is not a positive frequency factor"),
            std::string::npos);
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
  expect_refused(rewritten_model(dir,
                                 [](gguf::Writer& w) {
                                   EXPECT_TRUE(w.add_tensor("blk.0.attn_output.bias", DType::kF32, {64}, zeros(64)));
                                 }),
                 "blk.0.attn_output.bias");
  // Q/K/V biases are read (a llama file with attention_bias): all three, or a clear error naming the missing one.
  auto partial = DecoderModel::load(rewritten_model(
      dir, [](gguf::Writer& w) { EXPECT_TRUE(w.add_tensor("blk.0.attn_q.bias", DType::kF32, {64}, zeros(64))); }));
  ASSERT_FALSE(partial);
  EXPECT_NE(partial.status().message().find("tensor 'blk.0.attn_k.bias' is missing"), std::string::npos)
      << partial.status().message();
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_u32("llama.expert_count", 8); }),
                 "mixture of experts");
  expect_refused(rewritten_model(dir, [](gguf::Writer& w) { w.set_f32("llama.attention.logit_softcapping", 50); }),
                 "llama.attention.logit_softcapping");
  expect_refused(
      rewritten_model(
          dir, [](gguf::Writer& w) { EXPECT_TRUE(w.add_tensor("blk.7.attn_q.weight", DType::kF32, {64}, zeros(64))); }),
      "blk.7.attn_q.weight");  // a layer the file does not have
}

// granite and phi3 carry the llama tensors plus math (multipliers, fused projections) the forward pass does not do.
TEST(LlamaSupport, LookalikeArchitecturesAreRefused) {
  test::TempDir dir("llama_support_arch");
  for (const char* arch : {"granite", "phi3"}) {
    expect_refused(rewritten_model(dir, [&](gguf::Writer& w) { w.set_string("general.architecture", arch); }),
                   std::string("architecture '") + arch + "'");
  }
}

// DeepSeek-V2 files load with their latent attention and experts; what the forward pass does not do is named:
// DeepSeek-V3's group-limited routing and its expert score bias, gating other than softmax/sigmoid, RoPE scaling
// other than YaRN, a YaRN attention factor.
TEST(Deepseek2Support, V3RoutingAndOtherScalingAreRefusedByName) {
  test::TempDir dir("deepseek2_support");
  const SynthSpec tiny = *synth_preset("tiny-deepseek2");
  const auto edited = [&](const std::function<void(gguf::Writer&)>& edit) { return rewritten_model(dir, edit, tiny); };
  auto plain = DecoderModel::load(edited([](gguf::Writer&) {}));
  ASSERT_TRUE(plain) << plain.status().message();
  EXPECT_EQ((*plain)->config().attention_kind(), "MLA");
  expect_refused(edited([](gguf::Writer& w) { w.set_u32("deepseek2.expert_group_count", 8); }),
                 "group-limited expert routing");
  expect_refused(
      edited([](gguf::Writer& w) { EXPECT_TRUE(w.add_tensor("blk.1.exp_probs_b.bias", DType::kF32, {8}, zeros(8))); }),
      "expert score bias");
  expect_refused(edited([](gguf::Writer& w) { w.set_u32("deepseek2.expert_gating_func", 3); }), "expert_gating_func");
  expect_refused(edited([](gguf::Writer& w) { w.set_string("deepseek2.rope.scaling.type", "linear"); }),
                 "rope.scaling.type 'linear'");
  expect_refused(edited([](gguf::Writer& w) { w.set_f32("deepseek2.rope.scaling.attn_factor", 0.5f); }),
                 "YaRN attention factor");
  auto no_rank = DecoderModel::load(edited([](gguf::Writer& w) { w.set_u32("deepseek2.attention.kv_lora_rank", 0); }));
  ASSERT_FALSE(no_rank);
  EXPECT_NE(no_rank.status().message().find("kv_lora_rank"), std::string::npos) << no_rank.status().message();
}

}  // namespace
}  // namespace kvs
