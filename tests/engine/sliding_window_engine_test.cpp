// Sliding windows through the engine: the hybrid layout (Gemma 3's window layers in a pool of their own)
// holds exactly the bytes the sizing function predicts at every step of a 5,000-token generation and
// gives the same logits as one pool for all layers; a forced window (--kv-window) on a llama model equals
// the naive reference with the same window, in O(window) memory; and windows compose with batching,
// prefix caching, quantized K/V and preemption (each run equals its plain counterpart).
//
// Bounds: the hybrid and single-pool layouts, batched and alone, a prefix hit and a miss, read the same
// K/V bits in the same order (only their blocks differ), so their logits are bitwise equal. Against the
// naive fp32 llama (one token at a time, sums in another order) the bound is the 1e-4 of
// kv_cache_equivalence_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine_trace.h"
#include "model/synth.h"
#include "naive_compare.h"
#include "test_support.h"

namespace kvs {
namespace {

test::LoadedModel write_and_load(const SynthSpec& spec, const std::string& path) {
  EXPECT_TRUE(write_synth_model(spec, path));
  return test::load_model(path);
}

// tiny-gemma3 with a context of 8192 and a window of 40 (not a multiple of the block size).
SynthSpec long_gemma3() {
  SynthSpec s = *synth_preset("tiny-gemma3");
  s.ctx = 8192;
  s.sliding_window = 40;
  return s;
}

std::vector<TokenId> prompt_of(size_t n, size_t salt = 0) {
  std::vector<TokenId> p{1};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<TokenId>(260 + (i * 37 + salt * 11) % 250));
  return p;
}

void expect_bitwise_equal(const test::EngineTrace& a, const test::EngineTrace& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(test::worst_logit_difference(a, b), 0.0f) << what;
}

class SlidingWindowEngine : public ::testing::Test {
 protected:
  test::TempDir dir_{std::string("window_") + ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  ThreadPool pool_{2};
};

// Every step of a 5,000-token generation: each group holds what kv_bytes_held predicts for its window (the
// window group a few blocks, the global group the whole sequence), and nothing else is held.
TEST_F(SlidingWindowEngine, HybridBytesHeldEqualThePredictionAtEveryStepOf5000Tokens) {
  // The smallest gemma3 with both kinds of layer (5 of window 40, 1 global): 4,900 decode steps, under ASan too.
  SynthSpec spec = long_gemma3();
  spec.layers = 6;
  spec.dim = 32;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.head_dim = 16;
  spec.ffn = 64;
  const test::LoadedModel m = write_and_load(spec, dir_.file("g.gguf"));
  auto engine = Engine::create(*m.model, *m.tokenizer, pool_, {.max_batch_tokens = 64, .max_seqs = 1});
  ASSERT_TRUE(engine) << engine.status().message();
  Engine& e = **engine;
  ASSERT_EQ(e.kv_layers().describe(), "1 global layers + 5 layers of window 40");
  RequestParams params = test::greedy_request(prompt_of(100), 4900, /*all_logits=*/false);
  auto id = e.add_request(std::move(params), {});
  ASSERT_TRUE(id);
  size_t steps = 0, largest_window_blocks = 0;
  while (e.step()) {
    const size_t n = e.kv().num_tokens(*id);
    if (!e.kv().contains(*id)) continue;
    size_t predicted = 0;
    for (size_t g = 0; g < e.kv().num_groups(); ++g) {
      const KvCacheConfig& c = e.kv().group(g).config();
      predicted += kv_bytes_held(c.spec, c.layer_window, n);
      ASSERT_EQ(e.kv().group(g).usage().blocks_used, kv_blocks_held(n, 16, c.layer_window))
          << "group " << g << " n " << n;
    }
    ASSERT_EQ(e.kv().usage().bytes_used, predicted) << "tokens " << n;
    ASSERT_EQ(e.kv().bytes_held(*id), predicted) << "tokens " << n;
    largest_window_blocks = std::max(largest_window_blocks, e.kv().group(1).usage().blocks_used);
    if (++steps % 500 == 0) {
      const Status s = e.kv().check_invariants();
      ASSERT_TRUE(s.is_ok()) << s.message();
    }
  }
  EXPECT_GT(steps, 4800u);
  EXPECT_LE(largest_window_blocks, kv_blocks_for_tokens(40 - 1 + 64, 16) + 1);  // the window and a chunk
  EXPECT_EQ(e.kv().usage().blocks_used, 0u);
}

TEST_F(SlidingWindowEngine, HybridLayoutGivesTheLogitsOfOnePoolForAllLayers) {
  const test::LoadedModel m = write_and_load(long_gemma3(), dir_.file("g.gguf"));
  for (size_t chunk : {7, 512}) {
    const EngineConfig hybrid{.max_batch_tokens = chunk, .max_seqs = 1, .kv = {.block_size = 8}};
    EngineConfig single = hybrid;
    single.kv.hybrid = false;
    const RequestParams params = test::greedy_request(prompt_of(90), 150);
    const auto a = test::trace_request(*m.model, *m.tokenizer, pool_, hybrid, params);
    const auto b = test::trace_request(*m.model, *m.tokenizer, pool_, single, params);
    expect_bitwise_equal(a, b, fmt::format("chunk {}", chunk));
    EXPECT_LT(a.result.kv_bytes_held, b.result.kv_bytes_held / 3) << "the window layers hold only their window";
    EXPECT_GE(std::set<TokenId>(a.tokens.begin(), a.tokens.end()).size(), 4u);
  }
}

// --kv-window 12 on a llama model: the naive reference with the same window, and the blocks held are
// those of the window, however long the sequence.
TEST_F(SlidingWindowEngine, AForcedWindowOnLlamaEqualsTheNaiveWindowedReference) {
  SynthSpec spec = *synth_preset("tiny-gqa");
  const test::LoadedModel m = write_and_load(spec, dir_.file("l.gguf"));
  auto file = gguf::File::open(dir_.file("l.gguf"));
  ASSERT_TRUE(file);
  for (size_t block : {4, 16}) {
    for (size_t chunk : {5, 512}) {
      const EngineConfig config{.max_batch_tokens = chunk, .max_seqs = 1, .kv = {.block_size = block, .window = 12}};
      const auto trace =
          test::trace_request(*m.model, *m.tokenizer, pool_, config, test::greedy_request(prompt_of(30), 40));
      ASSERT_EQ(trace.tokens.size(), 40u);
      kvs::testing::NaiveLlama reference(*file, 12);
      const float worst = test::worst_against_naive(reference, prompt_of(30), trace, "window 12");
      EXPECT_LE(worst, 1e-4f) << "block " << block << " chunk " << chunk;
      EXPECT_EQ(trace.result.kv_blocks_held, kv_blocks_held(69, block, 12)) << "block " << block;
    }
  }
}

// Three requests at once equal each alone; a follow-up turn (the first request's prompt and answer, then
// more) hits the prefix cache in both groups (the window group still holds the last window of the first
// turn) and equals its miss on a fresh engine; with int8 K/V too. The int8 keys are grouped per token here:
// keys grouped per channel are quantized when a group of 16 rows completes, so their bits depend on where
// chunks end (tests/engine/quantized_kv_test bounds that), and batched chunks end elsewhere than alone.
TEST_F(SlidingWindowEngine, ComposesWithBatchingPrefixCachingAndQuantizedKv) {
  const test::LoadedModel m = write_and_load(long_gemma3(), dir_.file("g.gguf"));
  for (KvDType dtype : {KvDType::kF32, KvDType::kInt8}) {
    const std::string what(kv_dtype_name(dtype));
    const EngineConfig config{.max_batch_tokens = 48,
                              .max_seqs = 3,
                              .kv = {.block_size = 16, .dtype = dtype, .key_scales = KvScaleAxis::kPerToken}};
    EngineConfig no_cache = config;
    no_cache.kv.prefix_caching = false;
    std::vector<test::EngineTrace> alone;
    for (size_t r = 0; r < 3; ++r) {
      alone.push_back(test::trace_request(*m.model, *m.tokenizer, pool_, no_cache,
                                          test::greedy_request(prompt_of(70 + 20 * r, r), 60)));
    }
    auto engine = Engine::create(*m.model, *m.tokenizer, pool_, config);
    ASSERT_TRUE(engine);
    std::vector<test::EngineTrace> batched(3);
    for (size_t r = 0; r < 3; ++r) {
      RequestParams p = test::greedy_request(prompt_of(70 + 20 * r, r), 60);
      p.on_logits = [&batched, r](size_t position, std::span<const float> logits) {
        batched[r].logits[position].assign(logits.begin(), logits.end());
      };
      auto id = (*engine)->add_request(std::move(p), [&batched, r](const RequestOutput& out) {
        batched[r].tokens.insert(batched[r].tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      });
      ASSERT_TRUE(id);
    }
    while ((*engine)->step()) {
    }
    // (The batched requests share their first token, BOS, through the prefix cache: that row is not computed.)
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(batched[r].tokens, alone[r].tokens) << what << " request " << r;
      for (const auto& [position, row] : batched[r].logits)
        ASSERT_EQ(row, alone[r].logits.at(position)) << what << " request " << r << " position " << position;
    }
    // The next turn of request 2: its prompt, its answer (but the last token, never computed), 20 more tokens.
    std::vector<TokenId> turn = prompt_of(110, 2);
    turn.insert(turn.end(), alone[2].tokens.begin(), alone[2].tokens.end() - 1);
    for (size_t i = 0; i < 20; ++i) turn.push_back(static_cast<TokenId>(300 + i));
    test::EngineTrace hit;
    RequestParams next = test::greedy_request(turn, 30);
    next.on_logits = [&](size_t position, std::span<const float> logits) {
      hit.logits[position].assign(logits.begin(), logits.end());
    };
    auto result = generate(**engine, std::move(next));
    ASSERT_TRUE(result);
    hit.tokens = result->tokens;
    EXPECT_GE(result->cached_tokens, 160u) << what;  // 168 computed tokens of the first turn, to a block
    const auto miss = test::trace_request(*m.model, *m.tokenizer, pool_, no_cache, test::greedy_request(turn, 30));
    EXPECT_EQ(hit.tokens, miss.tokens) << what;
    for (const auto& [position, row] : hit.logits) ASSERT_EQ(row, miss.logits.at(position)) << what << " " << position;
    const Status s = (*engine)->kv().check_invariants();
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
}

// A request's own window (RequestParams::kv_window, the API's kv_window) beside a request without one, in one
// batch: the first equals an engine whose every request has --kv-window 12, and holds only its window's blocks;
// the second equals its run alone with full attention. A window does not combine with the no-cache baseline.
TEST_F(SlidingWindowEngine, ARequestsOwnWindowAppliesToItAlone) {
  const test::LoadedModel m = write_and_load(*synth_preset("tiny-gqa"), dir_.file("l.gguf"));
  const EngineConfig config{.max_batch_tokens = 24, .max_seqs = 2, .kv = {.block_size = 4, .prefix_caching = false}};
  EngineConfig forced = config;
  forced.kv.window = 12;
  const auto windowed_alone =
      test::trace_request(*m.model, *m.tokenizer, pool_, forced, test::greedy_request(prompt_of(30), 40));
  const auto full_alone =
      test::trace_request(*m.model, *m.tokenizer, pool_, config, test::greedy_request(prompt_of(40, 1), 40));
  auto engine = Engine::create(*m.model, *m.tokenizer, pool_, config);
  ASSERT_TRUE(engine);
  std::vector<test::EngineTrace> together(2);
  for (size_t r = 0; r < 2; ++r) {
    RequestParams p = test::greedy_request(r == 0 ? prompt_of(30) : prompt_of(40, 1), 40);
    if (r == 0) p.kv_window = 12;
    p.on_logits = [&together, r](size_t position, std::span<const float> logits) {
      together[r].logits[position].assign(logits.begin(), logits.end());
    };
    ASSERT_TRUE((*engine)->add_request(std::move(p), [&together, r](const RequestOutput& out) {
      together[r].tokens.insert(together[r].tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      if (out.finished) together[r].result.kv_blocks_held = out.kv_blocks_held;
    }));
  }
  while ((*engine)->step()) {
    const Status s = (*engine)->kv().check_invariants();
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  expect_bitwise_equal(together[0], windowed_alone, "the windowed request");
  expect_bitwise_equal(together[1], full_alone, "the request without a window");
  EXPECT_EQ(together[0].result.kv_blocks_held, kv_blocks_held(69, 4, 12));
  EXPECT_EQ(together[1].result.kv_blocks_held, kv_blocks_for_tokens(79, 4));
  RequestParams baseline = test::greedy_request(prompt_of(10), 4);
  baseline.kv_window = 8;
  baseline.recompute_history = true;
  const auto refused = (*engine)->add_request(std::move(baseline), {});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("KV window (8 tokens)"), std::string::npos) << refused.status().message();
}

// A global pool too small for two long sequences: one is preempted and recomputed; both equal their runs alone.
TEST_F(SlidingWindowEngine, PreemptedSequencesResumeToTheSameOutput) {
  const test::LoadedModel m = write_and_load(long_gemma3(), dir_.file("g.gguf"));
  const EngineConfig alone_config{
      .max_batch_tokens = 32, .max_seqs = 1, .kv = {.block_size = 16, .prefix_caching = false}};
  EngineConfig tight = alone_config;
  tight.max_seqs = 2;
  tight.kv.blocks = 20;  // the global group: 320 tokens for two sequences of up to 260
  auto engine = Engine::create(*m.model, *m.tokenizer, pool_, tight);
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<std::vector<TokenId>> out(2);
  for (size_t r = 0; r < 2; ++r) {
    auto id = (*engine)->add_request(
        test::greedy_request(prompt_of(60, r), 200, false),
        [&out, r](const RequestOutput& o) { out[r].insert(out[r].end(), o.new_tokens.begin(), o.new_tokens.end()); });
    ASSERT_TRUE(id);
  }
  while ((*engine)->step()) {
  }
  EXPECT_GT((*engine)->metrics().preemptions_total, 0u);
  for (size_t r = 0; r < 2; ++r) {
    const auto alone = test::trace_request(*m.model, *m.tokenizer, pool_, alone_config,
                                           test::greedy_request(prompt_of(60, r), 200, false));
    EXPECT_EQ(out[r], alone.tokens) << "request " << r;
  }
}

}  // namespace
}  // namespace kvs
