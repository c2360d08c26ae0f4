// Gemma 3 through the engine against the naive reference (model/naive_gemma3_forward.h): synthetic files
// of two shapes (tiny-gemma3: 7 layers, window 8, heads of 32 over a width of 64; and heads of 256 with 2
// query heads per KV head), prompts shorter and longer than the window, prefill chunks shorter and
// longer than it, paged blocks smaller and larger than it and the contiguous layout. Every logits row
// (prompt and generated positions) is within a stated bound of the reference, and the greedy tokens are
// the reference's own argmax.
//
// The bound: the engine computes in fp32 what the reference computes in double. An fp32 dot product of n
// terms of O(1) is off by about sqrt(n) x 2^-24 relative; q/k norms and the post-norms keep every
// activation O(1), so after 7 layers of a few such steps each the logits (O(1)-O(3)) differ by ~1e-5; the
// largest difference seen is 3.6e-6 (AVX2), and 5e-5 leaves a margin of 10x for other sums' orders. The weights are
// f32: with q8_0 the engine also quantizes the activations to int8 (as llama.cpp does), an approximation tested on its
// own elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine_trace.h"
#include "model/naive_gemma3_forward.h"
#include "model/synth.h"
#include "test_support.h"

namespace kvs {
namespace {

constexpr float kLogitBound = 5e-5f;

struct Gemma3Case {
  std::string name;
  SynthSpec spec;
};

SynthSpec tiny_gemma3() { return *synth_preset("tiny-gemma3"); }

// Heads of 256 as in every Gemma 3, 2 query heads per KV head; window 16.
SynthSpec wide_heads_gemma3() {
  SynthSpec s = tiny_gemma3();
  s.layers = 6;
  s.dim = 128;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 256;
  s.ffn = 256;
  s.sliding_window = 16;
  return s;
}

class Gemma3Reference : public ::testing::Test {
 protected:
  void load(const SynthSpec& spec) {
    path_ = dir_.file("gemma3.gguf");
    ASSERT_TRUE(write_synth_model(spec, path_));
    loaded_ = test::load_model(path_);
    ASSERT_TRUE(loaded_.model && loaded_.tokenizer);
  }

  // The engine under `config` against the reference, for a prompt of `prompt_length` tokens and 24 generated.
  void expect_matches_reference(size_t prompt_length, const EngineConfig& config, const std::string& what) {
    std::vector<TokenId> prompt{1};
    for (size_t i = 1; i < prompt_length; ++i) prompt.push_back(static_cast<TokenId>(260 + (i * 37) % 250));
    ThreadPool pool(2);
    const test::EngineTrace trace =
        test::trace_request(*loaded_.model, *loaded_.tokenizer, pool, config, test::greedy_request(prompt, 24));
    ASSERT_EQ(trace.tokens.size(), 24u) << what;
    auto file = gguf::File::open(path_);
    ASSERT_TRUE(file);
    kvs::testing::NaiveGemma3 reference(*file);
    std::vector<TokenId> fed = prompt;
    fed.insert(fed.end(), trace.tokens.begin(), trace.tokens.end() - 1);
    float worst = 0.0f;
    for (size_t position = 0; position < fed.size(); ++position) {
      const std::vector<float> want = reference.step(fed[position]);
      const auto it = trace.logits.find(position);
      ASSERT_NE(it, trace.logits.end()) << what << " position " << position;
      ASSERT_EQ(it->second.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(it->second[i] - want[i]));
      if (position + 1 >= prompt.size()) {
        const TokenId next = trace.tokens[position + 1 - prompt.size()];
        EXPECT_EQ(next, std::max_element(want.begin(), want.end()) - want.begin()) << what << " position " << position;
      }
    }
    EXPECT_LE(worst, kLogitBound) << what;
    // The comparison means something only if the model says something varied.
    EXPECT_GE(std::set<TokenId>(trace.tokens.begin(), trace.tokens.end()).size(), 4u) << what;
  }

  test::TempDir dir_{std::string("gemma3_") + ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::string path_;
  test::LoadedModel loaded_;
};

TEST_F(Gemma3Reference, ConfigIsReadAsLlamaCppReadsGemma3) {
  load(tiny_gemma3());
  const ModelConfig& c = loaded_.model->config();
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.head_dim, 32u);
  EXPECT_EQ(c.q_dim(), 128u);  // not dim (64)
  EXPECT_EQ(c.layer_windows, (std::vector<uint32_t>{8, 8, 8, 8, 8, 0, 8}));
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_FLOAT_EQ(c.rope_freq_base_local, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(c.embedding_scale, 8.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(32.0f));
  EXPECT_TRUE(c.tied_output);
}

TEST_F(Gemma3Reference, TinyModelEqualsTheReferenceAcrossWindowBlockAndChunkSizes) {
  load(tiny_gemma3());  // window 8
  for (size_t prompt : {5, 30}) {
    for (size_t block : {4, 16}) {
      for (size_t chunk : {3, 512}) {
        expect_matches_reference(prompt, {.max_batch_tokens = chunk, .max_seqs = 1, .kv = {.block_size = block}},
                                 fmt::format("prompt {} block {} chunk {}", prompt, block, chunk));
      }
    }
    expect_matches_reference(prompt, {.max_seqs = 1, .kv = {.layout = KvLayout::kContiguous}},
                             fmt::format("prompt {} contiguous", prompt));
  }
}

TEST_F(Gemma3Reference, HeadsOf256EqualTheReference) {
  load(wide_heads_gemma3());  // window 16
  for (size_t prompt : {9, 40}) {
    expect_matches_reference(prompt, {.max_batch_tokens = 7, .max_seqs = 1, .kv = {.block_size = 8}},
                             fmt::format("prompt {} chunk 7 block 8", prompt));
  }
}

}  // namespace
}  // namespace kvs
