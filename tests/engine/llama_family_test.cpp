// The Llama family as the files people download hold it, through the engine against the naive reference
// (model/naive_llama_forward.h): Llama 3.1/3.2 RoPE scaling (rope_freqs.weight) and linear scaling, Qwen2
// (Q/K/V biases, NeoX RoPE, tied output) and Mistral (GQA with one KV head, a window on every layer), on
// synthetic files written with llama.cpp's tensor and metadata names. Each runs paged with chunked prefill
// and contiguous, and batched with a second request (equal to alone, bit for bit); every logits row is within
// the bound of kv_cache_equivalence_test (1e-4: the engine's fp32 sums in another order than the reference's,
// over 2 layers of O(1) activations) and the greedy tokens are the reference's argmax.
#include <gtest/gtest.h>

#include <set>

#include "engine_trace.h"
#include "model/synth.h"
#include "naive_compare.h"
#include "tensor/ops.h"
#include "test_support.h"

namespace kvs {
namespace {

constexpr float kLogitBound = 1e-4f;

std::vector<TokenId> prompt_of(size_t n, size_t salt = 0) { return test::varied_prompt(n, salt); }

class LlamaFamily : public ::testing::Test {
 protected:
  void load(const SynthSpec& spec) {
    path_ = dir_.file("m.gguf");
    ASSERT_TRUE(write_synth_model(spec, path_));
    loaded_ = test::load_model(path_);
    ASSERT_TRUE(loaded_.model && loaded_.tokenizer);
  }
  test::EngineTrace trace(const EngineConfig& config, const std::vector<TokenId>& prompt, size_t n = 24) {
    return test::trace_request(*loaded_.model, *loaded_.tokenizer, pool_, config, test::greedy_request(prompt, n));
  }
  // The engine under several layouts and chunkings, each against the reference; returns the paged trace.
  test::EngineTrace expect_matches_reference(size_t prompt_length) {
    const std::vector<TokenId> prompt = prompt_of(prompt_length);
    test::EngineTrace paged;
    for (const auto& [config, what] : std::vector<std::pair<EngineConfig, std::string>>{
             {{.max_batch_tokens = 5, .max_seqs = 1, .kv = {.block_size = 4}}, "paged, chunks of 5"},
             {{.max_seqs = 1, .kv = {.layout = KvLayout::kContiguous}}, "contiguous, one chunk"}}) {
      const test::EngineTrace t = trace(config, prompt);
      auto file = gguf::File::open(path_);
      EXPECT_TRUE(file);
      if (!file) return {};
      testing::NaiveLlama reference(*file);
      const std::string where = fmt::format("{}, prompt {}", what, prompt_length);
      EXPECT_LE(test::worst_against_naive(reference, prompt, t, where), kLogitBound) << where;
      EXPECT_GE(std::set<TokenId>(t.tokens.begin(), t.tokens.end()).size(), 4u) << where;
      if (paged.tokens.empty()) paged = t;
    }
    return paged;
  }
  // Alone and batched with another request of another length: bit for bit the same.
  void expect_batch_invariant(size_t prompt_length) {
    const EngineConfig config{.max_batch_tokens = 16, .max_seqs = 2, .kv = {.block_size = 4}};
    const std::vector<TokenId> prompt = prompt_of(prompt_length), other = prompt_of(prompt_length + 7, 3);
    const test::EngineTrace alone = trace(config, prompt);
    auto engine = Engine::create(*loaded_.model, *loaded_.tokenizer, pool_, config);
    ASSERT_TRUE(engine);
    test::EngineTrace batched;
    RequestParams a = test::greedy_request(prompt, 24);
    a.on_logits = [&](size_t position, std::span<const float> logits) {
      batched.logits[position].assign(logits.begin(), logits.end());
    };
    ASSERT_TRUE((*engine)->add_request(std::move(a), [&](const RequestOutput& out) {
      batched.tokens.insert(batched.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    }));
    ASSERT_TRUE((*engine)->add_request(test::greedy_request(other, 30), {}));
    while ((*engine)->step()) {
    }
    EXPECT_EQ(batched.tokens, alone.tokens);
    EXPECT_EQ(test::worst_logit_difference(alone, batched), 0.0f);
  }

  test::TempDir dir_{std::string("family_") + ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::string path_;
  test::LoadedModel loaded_;
  ThreadPool pool_{2};
};

TEST_F(LlamaFamily, Llama3RopeFactorsAreReadAndEqualTheReference) {
  const SynthSpec spec = *synth_preset("tiny-llama3");
  load(spec);
  const ModelConfig& c = loaded_.model->config();
  ASSERT_EQ(c.rope_freq_factors.size(), 8u);
  // Head dim 16, base 10000, original context 64, factor 8: wavelengths 6.3 (< 64 / 4: unscaled), 19.9 and 62.8
  // (between 16 and 64: smoothed), then above 64 (the factor).
  EXPECT_EQ(c.rope_freq_factors[0], 1.0f);
  EXPECT_GT(c.rope_freq_factors[1], 1.0f);
  EXPECT_LT(c.rope_freq_factors[2], 8.0f);
  EXPECT_GT(c.rope_freq_factors[2], c.rope_freq_factors[1]);
  for (size_t i = 3; i < 8; ++i) EXPECT_EQ(c.rope_freq_factors[i], 8.0f) << i;
  EXPECT_EQ(c.rope_frequencies()[5], rope_inverse_frequencies(16, 10000.0f)[5] / 8.0f);
  const test::EngineTrace scaled = expect_matches_reference(40);

  // The factors change what the model computes: the same weights without them decode otherwise.
  SynthSpec unscaled = spec;
  unscaled.rope_scaling = SynthRopeScaling::kNone;
  load(unscaled);
  EXPECT_TRUE(loaded_.model->config().rope_freq_factors.empty());
  EXPECT_GT(test::worst_logit_difference(
                scaled, trace({.max_batch_tokens = 5, .max_seqs = 1, .kv = {.block_size = 4}}, prompt_of(40))),
            100 * kLogitBound);
}

TEST_F(LlamaFamily, LinearRopeScalingEqualsTheReference) {
  SynthSpec spec = *synth_preset("tiny-gqa");
  spec.rope_scaling = SynthRopeScaling::kLinear;
  spec.rope_factor = 4.0f;
  load(spec);
  EXPECT_EQ(loaded_.model->config().rope_freq_scale, 0.25f);
  expect_matches_reference(30);
}

TEST_F(LlamaFamily, Qwen2BiasesAndNeoxRopeEqualTheReference) {
  load(*synth_preset("tiny-qwen2"));
  const ModelConfig& c = loaded_.model->config();
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(loaded_.model->weights().layers[1].bk.size(), c.kv_dim());
  expect_matches_reference(33);
  expect_batch_invariant(20);
}

TEST_F(LlamaFamily, MistralWindowOnEveryLayerEqualsTheReference) {
  load(*synth_preset("tiny-mistral"));
  const ModelConfig& c = loaded_.model->config();
  EXPECT_EQ(c.layer_windows, std::vector<uint32_t>(2, 16));
  EXPECT_EQ(c.attention_kind(), "MQA");
  for (size_t prompt : {9, 40}) expect_matches_reference(prompt);  // shorter and longer than the window
  expect_batch_invariant(30);
}

// A qwen2 file without its biases, or with a bias of the wrong width, is refused with the tensor named.
TEST_F(LlamaFamily, Qwen2WithoutBiasesIsRefused) {
  SynthSpec spec = *synth_preset("tiny-qwen2");
  spec.architecture = "llama";
  spec.qkv_bias = false;
  ASSERT_TRUE(write_synth_model(spec, dir_.file("plain.gguf")));
  auto file = gguf::File::open(dir_.file("plain.gguf"));
  ASSERT_TRUE(file);
  gguf::Writer w;
  for (const auto& [key, value] : file->metadata()) {
    std::string k = key;
    if (k.starts_with("llama.")) k = "qwen2." + k.substr(6);
    w.set(k == "general.architecture" ? key : k, k == "general.architecture" ? gguf::Value::of("qwen2") : value);
  }
  for (const gguf::TensorInfo& t : file->tensors()) {
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.dims, {t.data.begin(), t.data.end()}));
  }
  ASSERT_TRUE(w.write(dir_.file("qwen2.gguf")));
  auto model = DecoderModel::load(dir_.file("qwen2.gguf"));
  ASSERT_FALSE(model);
  EXPECT_NE(model.status().message().find("tensor 'blk.0.attn_q.bias' is missing"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace kvs
