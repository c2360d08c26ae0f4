// The Llama family's forward pass on the GPU (lavapipe here) through the engine, against the independent references
// and against the CPU path: stories260K's greedy ids of every reference prompt exactly and its logits within 1e-4 at
// the checkpoints (the CPU's golden bound: both are fp32 sums in other orders); the engine's features on the GPU
// giving the CPU's outputs (mixed prefill and decode of several requests, prefix-cache hits, block sizes 1, 16 and
// 256, f16 and bf16 K/V; int8 and int4 K/V, keys per token and per channel, plain or rotated; a sliding window); a
// Qwen2-shaped file (biases, NeoX RoPE, GQA); a Mistral-shaped one (its own window); Gemma 3; eviction policies;
// DeepSeek-V2 (MLA, experts); Q8_0 weights; and what the GPU refuses.
#include <gtest/gtest.h>

#include <cmath>

#include "cli/run_kvserve.h"
#include "engine/engine_trace.h"
#include "gpu/gpu_model.h"
#include "gpu_model_fixture.h"
#include "gpu_test_fixture.h"
#include "model/synth.h"
#include "tensor/isa.h"
#include "test_support.h"

namespace kvs {
namespace {

constexpr float kGoldenBound = 1e-4f;

using GpuForward = test::GpuModelTest;

// Largest |a - b| over the positions whose logits both traces hold: a cache of another element type holds another
// number of blocks and keys per channel another prefix, so their requests may be scheduled and cached differently.
float worst_common_difference(const test::EngineTrace& a, const test::EngineTrace& b) {
  float worst = 0.0f;
  for (const auto& [position, row] : a.logits) {
    const auto it = b.logits.find(position);
    if (it == b.logits.end()) continue;
    for (size_t i = 0; i < row.size(); ++i) worst = std::max(worst, std::fabs(row[i] - it->second[i]));
  }
  return worst;
}

// The same greedy tokens, or where the first differs, the CPU's logit of its token over the GPU's token's is within the
// largest difference of the two devices' logits at that position (the arithmetic can turn that near tie); up to there
// the devices' logits within `bound`.
void expect_same_tokens_or_near_tie(const test::EngineTrace& gpu, const test::EngineTrace& cpu, size_t prompt,
                                    float bound, const std::string& what) {
  ASSERT_EQ(gpu.tokens.size(), cpu.tokens.size()) << what;
  size_t i = 0;
  while (i < cpu.tokens.size() && gpu.tokens[i] == cpu.tokens[i]) ++i;
  const size_t position = prompt + i - 1;  // the logits the i-th generated token was drawn from
  for (const auto& [at, row] : cpu.logits) {
    if (at > position || !gpu.logits.contains(at)) continue;
    for (size_t v = 0; v < row.size(); ++v)
      ASSERT_LE(std::fabs(row[v] - gpu.logits.at(at)[v]), bound) << what << " position " << at;
  }
  if (i == cpu.tokens.size()) return;
  ASSERT_TRUE(cpu.logits.contains(position) && gpu.logits.contains(position)) << what;
  const std::vector<float>&c = cpu.logits.at(position), &g = gpu.logits.at(position);
  ASSERT_EQ(std::max_element(c.begin(), c.end()) - c.begin(), cpu.tokens[i]) << what << ": the logits' position";
  float apart = 0.0f;
  for (size_t v = 0; v < c.size(); ++v) apart = std::max(apart, std::fabs(c[v] - g[v]));
  EXPECT_LE(c[cpu.tokens[i]] - c[gpu.tokens[i]], apart)
      << what << ": token " << i << " differs with the CPU's logits " << c[cpu.tokens[i]] << " and " << c[gpu.tokens[i]]
      << ", the devices " << apart << " apart";
}

TEST_F(GpuForward, Stories260KGivesTheReferenceGreedyIdsAndLogits) {
  ASSERT_NO_FATAL_FAILURE(load(test::default_model_path()));
  size_t cases = 0;
  for (const auto& j : test::read_jsonl(test::shared_path("reference/stories260K/greedy.jsonl"))) {
    const auto prompt = j["prompt_ids"].get<std::vector<TokenId>>();
    const auto greedy = j["greedy_ids"].get<std::vector<TokenId>>();
    const test::EngineTrace t = trace(*gpu_, {.max_batch_tokens = 64, .max_seqs = 1}, prompt, greedy.size());
    EXPECT_EQ(t.tokens, greedy) << j["prompt"];
    for (const auto& [key, value] : j["logits_checkpoints"].items()) {
      const auto want = value.get<std::vector<float>>();
      const auto it = t.logits.find(std::stoul(key));
      if (it == t.logits.end()) continue;  // past the last computed token
      float worst = 0.0f;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(it->second[i] - want[i]));
      EXPECT_LE(worst, kGoldenBound) << j["prompt"] << " position " << key;
    }
    // The first two prompts with int8 K/V (keys per channel) and int4 (keys per token, rotated): the greedy ids of the
    // CPU path with the same K/V format (the references are the f32 cache's), or a near tie: where they part, the CPU's
    // two tokens are closer than the two devices' logits there differ (a K or V value that straddles a quantization
    // boundary on one side moves an int4 logit by that much: one int4 run parts from the CPU's about 150 tokens in),
    // the logits up to there within what the format itself moves the CPU's: each device's values lie within a step of
    // the other's where the quantization rounds every value by up to half a step (over these runs of up to 256 tokens,
    // keys per channel sealed 16 rows at a time, measured up to 30% of it; a broken format misses by whole logits).
    for (const auto& [dtype, keys, rotated] : {std::tuple{KvDType::kInt8, KvScaleAxis::kPerChannel, false},
                                               std::tuple{KvDType::kInt4, KvScaleAxis::kPerToken, true}}) {
      if (cases >= 2) break;  // the first two prompts (up to 256 tokens each)
      const EngineConfig config{.max_batch_tokens = 64,
                                .max_seqs = 1,
                                .kv = {.dtype = {dtype, dtype}, .key_scales = keys, .rotate_keys = rotated}};
      const test::EngineTrace cpu = trace(*host_, config, prompt, greedy.size());
      EngineConfig f32 = config;
      f32.kv.dtype = KvDType::kF32;
      const float bound = worst_common_difference(cpu, trace(*host_, f32, prompt, greedy.size()));
      expect_same_tokens_or_near_tie(
          trace(*gpu_, config, prompt, greedy.size()), cpu, prompt.size(), bound,
          fmt::format("{} {}{}", j["prompt"].get<std::string>(), kv_dtype_name(dtype), rotated ? " rotated" : ""));
    }
    ++cases;
  }
  EXPECT_GE(cases, 3u);
}

// stories4M (dim 256, 6 layers, GQA 8/4; trained like stories260K, with its tokenizer), converted by our own
// importer: the CPU and the GPU both give the reference's greedy ids of every prompt and its logits within the golden
// bound at the checkpoints.
TEST_F(GpuForward, Stories4MGivesTheReferenceGreedyIdsAndLogitsOnBothDevices) {
  test::TempDir dir("gpu_forward_stories4m");
  const std::string path = dir.file("stories4M.gguf");
  const test::KvserveResult converted =
      test::run_kvserve({"convert", "--llama2c", test::shared_path("models/stories4M/stories4M.bin"), "--tokenizer",
                         test::shared_path("models/stories260K/tok512.bin"), "-o", path, "--type", "f32"},
                        dir);
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  ASSERT_NO_FATAL_FAILURE(load(path));
  size_t cases = 0;
  for (const auto& j : test::read_jsonl(test::shared_path("reference/stories4M/greedy.jsonl"))) {
    const auto prompt = j["prompt_ids"].get<std::vector<TokenId>>();
    const auto greedy = j["greedy_ids"].get<std::vector<TokenId>>();
    EXPECT_EQ(tokenizer_->encode(j["prompt"].get<std::string>(), true), prompt) << j["prompt"];
    for (const Model* model : {static_cast<const Model*>(host_.get()), static_cast<const Model*>(gpu_.get())}) {
      const char* side = model == gpu_.get() ? "gpu" : "cpu";
      const test::EngineTrace t = trace(*model, {.max_batch_tokens = 64, .max_seqs = 1}, prompt, greedy.size());
      EXPECT_EQ(t.tokens, greedy) << side << " " << j["prompt"];
      for (const auto& [key, value] : j["logits_checkpoints"].items()) {
        const auto want = value.get<std::vector<float>>();
        const auto it = t.logits.find(std::stoul(key));
        if (it == t.logits.end()) continue;
        float worst = 0.0f;
        for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(it->second[i] - want[i]));
        EXPECT_LE(worst, kGoldenBound) << side << " " << j["prompt"] << " position " << key;
      }
    }
    ++cases;
  }
  EXPECT_GE(cases, 3u);
}

// The engine's features on the GPU: each request's logits those of the CPU path within the golden bound, its tokens
// the same; a batch of three requests of mixed lengths (prefill chunks beside decode tokens), then a repeat of the
// first prompt that hits the prefix cache.
TEST_F(GpuForward, EngineFeaturesGiveTheCpusOutputs) {
  ASSERT_NO_FATAL_FAILURE(load(test::default_model_path()));
  struct Case {
    KvDType dtype;
    KvScaleAxis keys;
    size_t block_size;
    bool rotated = false;
    size_t window = 0;
  };
  std::vector<Case> cases;
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kBF16})
    for (size_t block_size : {1, 16, 256}) cases.push_back({dtype, KvScaleAxis::kPerToken, block_size});
  // Quantized K/V in blocks of 16 (the layouts are the float types'), keys per token and per channel (the default:
  // groups of 16 rows, prefill chunks of 24 tokens completing them and leaving them filling, decode completing them,
  // and the prefix hit's partial block copied with its key tail; GpuAttentionTest holds smaller groups to the
  // host's bytes).
  for (KvDType dtype : {KvDType::kInt8, KvDType::kInt4}) {
    cases.push_back({dtype, KvScaleAxis::kPerToken, 16});
    cases.push_back({dtype, KvScaleAxis::kPerChannel, 16});
  }
  // Rotated keys (stored as H k, attended by H q), per channel and per token.
  cases.push_back({KvDType::kInt8, KvScaleAxis::kPerChannel, 16, true});
  cases.push_back({KvDType::kInt4, KvScaleAxis::kPerToken, 16, true});
  // A sliding window of 24 over every layer (--kv-window): the blocks before it let go, holes in the block tables.
  cases.push_back({KvDType::kF32, KvScaleAxis::kPerToken, 16, false, 24});
  cases.push_back({KvDType::kInt8, KvScaleAxis::kPerChannel, 16, false, 24});
  for (const auto& [dtype, keys, block_size, rotated, window] : cases) {
    const EngineConfig config{.max_batch_tokens = 24,
                              .max_seqs = 3,
                              .kv = {.block_size = block_size,
                                     .dtype = {dtype, dtype},
                                     .key_scales = keys,
                                     .rotate_keys = rotated,
                                     .window = window}};
    const std::string what = fmt::format("{} (keys per {}{}) blocks of {}, window {}", kv_dtype_name(dtype),
                                         keys == KvScaleAxis::kPerChannel ? "channel" : "token",
                                         rotated ? ", rotated" : "", block_size, window);
    std::vector<test::EngineTrace> runs[3];
    std::vector<size_t> cached[3];
    // The CPU, the GPU, and for 16-bit K/V the CPU over an f32 cache (what the element type's rounding does).
    for (int side = 0; side < (dtype == KvDType::kF32 ? 2 : 3); ++side) {
      const Model& model = side == 1 ? *gpu_ : static_cast<const Model&>(*host_);
      EngineConfig side_config = config;
      if (side == 2) side_config.kv.dtype = KvDType::kF32;
      test::EngineSession session(model, *tokenizer_, pool_, side_config);
      const std::vector<std::vector<TokenId>> prompts{test::varied_prompt(40, 1), test::varied_prompt(7, 2),
                                                      test::varied_prompt(70, 3)};
      // Three at once: add all, step until done.
      std::vector<test::EngineTrace> traces(3);
      for (size_t r = 0; r < 3; ++r) {
        RequestParams p = test::greedy_request(prompts[r], 12);
        p.on_logits = [&traces, r](size_t position, std::span<const float> logits) {
          traces[r].logits[position].assign(logits.begin(), logits.end());
        };
        ASSERT_TRUE(session.engine().add_request(std::move(p), [&traces, r](const RequestOutput& out) {
          traces[r].tokens.insert(traces[r].tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
        }));
      }
      while (session.engine().step()) {
      }
      // The first prompt again: its blocks are in the prefix cache.
      test::EngineTrace again = session.run(test::greedy_request(prompts[0], 12));
      cached[side].push_back(again.result.cached_tokens);
      traces.push_back(std::move(again));
      session.check();
      runs[side] = std::move(traces);
    }
    ASSERT_EQ(runs[0].size(), runs[1].size());
    for (size_t r = 0; r < runs[0].size(); ++r) {
      EXPECT_EQ(runs[1][r].tokens, runs[0][r].tokens) << what << " request " << r;
      // 16-bit and quantized K/V: where the two sides' fp32 K or V straddle a rounding boundary of the element type
      // (or a group's range, a quantization step), it is stored one step apart (f16 2^-11, bf16 2^-8 relative; int8
      // and int4 a step of their group): a few elements, against the rounding of every element that separates the
      // cache from an f32 one. A quarter of that is the bound (measured: f16 2.6-7.3%, bf16 up to 9.4%, int8 up to
      // 0.6%, int4 up to 0.02% of it; f32 within 1.7e-5 of the CPU).
      const float rounding = dtype == KvDType::kF32 ? 0.0f : worst_common_difference(runs[0][r], runs[2][r]);
      const float difference = test::worst_logit_difference(runs[1][r], runs[0][r]);
      EXPECT_LE(difference, std::max(kGoldenBound, 0.25f * rounding)) << what << " request " << r;
    }
    EXPECT_EQ(cached[1], cached[0]) << what;
    EXPECT_GT(cached[1][0], 0u) << what << ": the repeat must hit the prefix cache";
  }
}

// Parallel sampling (n > 1: the prompt's blocks shared, the partial block copied on write by the op log) in a pool too
// small for every sample's tail (preempted samples resume from the prefix cache): each sample draws the tokens it
// draws on the CPU (seeded sampling over logits within 1.7e-5 of the CPU's; a draw that falls within that of a
// boundary would differ, and none does here) and the pool preempts on both sides.
TEST_F(GpuForward, ParallelSamplesAndPreemptionGiveTheCpusTokens) {
  ASSERT_NO_FATAL_FAILURE(load(test::default_model_path()));
  const EngineConfig config{.max_batch_tokens = 64, .kv = {.block_size = 16, .blocks = 12}};
  std::vector<std::vector<TokenId>> samples[2];
  uint64_t preemptions[2] = {};
  for (int side = 0; side < 2; ++side) {
    const Model& model = side == 1 ? *gpu_ : static_cast<const Model&>(*host_);
    auto engine = Engine::create(model, *tokenizer_, pool_, config);
    ASSERT_TRUE(engine) << engine.status().message();
    RequestParams p;
    p.prompt = test::varied_prompt(40, 8);
    p.max_new_tokens = 40;
    p.sampling = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 7};
    p.stop_at_eos = false;
    p.num_samples = 4;
    samples[side].resize(4);
    ASSERT_TRUE((*engine)->add_request(std::move(p), [&samples, side](const RequestOutput& out) {
      samples[side][out.sample].insert(samples[side][out.sample].end(), out.new_tokens.begin(), out.new_tokens.end());
    }));
    while ((*engine)->step()) {
      const Status s = (*engine)->kv().check_invariants();
      ASSERT_TRUE(s.is_ok()) << s.message();
    }
    preemptions[side] = (*engine)->metrics().preemptions_total;
  }
  EXPECT_GT(preemptions[1], 0u) << "the pool should force preemptions";
  EXPECT_EQ(preemptions[1], preemptions[0]);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(samples[1][i].size(), 40u);
    EXPECT_EQ(samples[1][i], samples[0][i]) << "sample " << i;
  }
}

// A Qwen2-shaped file (Q/K/V biases, NeoX RoPE, 4 query heads a KV head) in F32, a Mistral-shaped one (MQA, the
// file's own sliding window of 16: 46 tokens run past it, the blocks before it let go) in F32, and a Llama-shaped one
// in Q8_0: the GPU reads Q8_0 rows with fp32
// activations where the CPU quantizes activations to int8 (~0.6% a projection, the bound of
// tests/engine/kquant_model_test: 0.25 on the logits), so the Q8_0 case is held to that bound.
TEST_F(GpuForward, Qwen2MistralShapesAndQ8_0WeightsEqualTheCpu) {
  test::TempDir dir("gpu_forward_synth");
  for (const auto& [preset, type, bound] :
       std::vector<std::tuple<const char*, DType, float>>{{"tiny-qwen2", DType::kF32, kGoldenBound},
                                                          {"tiny-mistral", DType::kF32, kGoldenBound},
                                                          {"tiny-llama3", DType::kQ8_0, 0.25f}}) {
    SynthSpec spec = *synth_preset(preset);
    spec.type = type;
    const std::string path = dir.file(std::string(preset) + ".gguf");
    ASSERT_TRUE(write_synth_model(spec, path));
    ASSERT_NO_FATAL_FAILURE(load(path));
    const std::vector<TokenId> prompt = test::varied_prompt(30);
    const EngineConfig config{.max_batch_tokens = 16, .max_seqs = 1};
    const test::EngineTrace cpu = trace(*host_, config, prompt, 16), gpu = trace(*gpu_, config, prompt, 16);
    const float worst = test::worst_logit_difference(gpu, cpu);
    EXPECT_LE(worst, bound) << preset;
    if (std::string_view(preset) == "tiny-mistral") {
      EXPECT_GT(host_->config().window_of(0), 0u) << "the file must carry a window";
    }
    if (type == DType::kF32) {
      EXPECT_EQ(gpu.tokens, cpu.tokens) << preset;
    }
  }
}

// Gemma 3 (tiny-gemma3's shape with a window of 40, not a multiple of the blocks, 6 window layers and 1 global, a
// context of 1024): a 90-token prompt and 60 tokens past it give the CPU's tokens, with logits within the golden bound
// (measured 4.5e-6), and hold the CPU's KV bytes: with the hybrid layout the global layer holds the 150 tokens (10
// blocks) and each window layer at most its window and a chunk (5 blocks), under half of one pool for all 7 layers (70
// blocks). Again with int8 K/V (keys per channel) held, as in EngineFeaturesGiveTheCpusOutputs, to a quarter of what
// int8 itself moves the CPU's logits (measured 0.012 against a bound of 1.06).
TEST_F(GpuForward, Gemma3GivesTheCpusTokensAndLogitsWithWindowPoolsOfItsWindow) {
  test::TempDir dir("gpu_forward_gemma3");
  SynthSpec spec = *synth_preset("tiny-gemma3");
  spec.ctx = 1024;
  spec.sliding_window = 40;
  ASSERT_TRUE(write_synth_model(spec, dir.file("g.gguf")));
  ASSERT_NO_FATAL_FAILURE(load(dir.file("g.gguf")));
  const std::vector<TokenId> prompt = test::varied_prompt(90);
  size_t hybrid_bytes = 0, single_bytes = 0;
  for (const auto& [dtype, hybrid] :
       std::vector<std::pair<KvDType, bool>>{{KvDType::kF32, true}, {KvDType::kF32, false}, {KvDType::kInt8, true}}) {
    const EngineConfig config{.max_batch_tokens = 32, .max_seqs = 1, .kv = {.dtype = {dtype, dtype}, .hybrid = hybrid}};
    const std::string what = fmt::format("{}, {}", kv_dtype_name(dtype), hybrid ? "hybrid" : "one pool");
    const test::EngineTrace cpu = trace(*host_, config, prompt, 60), gpu = trace(*gpu_, config, prompt, 60);
    EXPECT_EQ(gpu.tokens, cpu.tokens) << what;
    float bound = kGoldenBound;
    if (dtype != KvDType::kF32) {
      EngineConfig f32 = config;
      f32.kv.dtype = KvDType::kF32;
      bound = std::max(bound, 0.25f * worst_common_difference(cpu, trace(*host_, f32, prompt, 60)));
    }
    EXPECT_LE(test::worst_logit_difference(gpu, cpu), bound) << what;
    EXPECT_EQ(gpu.result.kv_bytes_held, cpu.result.kv_bytes_held) << what;
    if (dtype == KvDType::kF32) (hybrid ? hybrid_bytes : single_bytes) = gpu.result.kv_bytes_held;
  }
  EXPECT_LT(hybrid_bytes * 2, single_bytes) << "the window layers hold only their window";
}

// Eviction policies on the GPU (window, sinks, H2O per KV head and pooled over them), 480 tokens past a 40-token
// prompt with a budget of 64 slots: past stories260K's context of 512, in at most 4 blocks of 16. The CPU's tokens,
// and logits within the golden bound (measured 1.3e-5 to 2.3e-5): compaction moves and re-rotates the kept keys (the
// host executor over the device's mapped pool) and H2O ranks by the attention mass slot_mass.comp sums, the CPU's
// within a few units of 2^-24 (GpuAttentionTest), so both keep the same tokens. Sinks and H2O per head again with int8
// K/V (keys per token: compaction moves rows one at a time), rotated, held to the CPU's within a quarter of what int8
// moves (measured 0.036 against 6.5 under sinks, 0.011 against 0.23 under H2O).
TEST_F(GpuForward, EvictionPoliciesGiveTheCpusTokensPastTheContextInTheBudget) {
  ASSERT_NO_FATAL_FAILURE(load(test::default_model_path()));
  const std::vector<TokenId> prompt = test::varied_prompt(40);
  const size_t n = 480;
  ASSERT_GT(prompt.size() + n, host_->config().context_length);
  const auto policy = [](KvPolicyKind kind, KvScoreScope scores = KvScoreScope::kPerHead) {
    return KvPolicyParams{.kind = kind, .budget = 64, .scores = scores};
  };
  for (const KvPolicyParams& p :
       {policy(KvPolicyKind::kWindow), policy(KvPolicyKind::kSinks), policy(KvPolicyKind::kHeavyHitters),
        policy(KvPolicyKind::kHeavyHitters, KvScoreScope::kPooled)}) {
    for (KvDType dtype : {KvDType::kF32, KvDType::kInt8}) {
      const bool int8 = dtype == KvDType::kInt8;
      if (int8 && (p.kind == KvPolicyKind::kWindow || p.scores == KvScoreScope::kPooled)) continue;
      const EngineConfig config{
          .max_batch_tokens = 16,
          .max_seqs = 1,
          .kv = {.dtype = {dtype, dtype}, .key_scales = KvScaleAxis::kPerToken, .rotate_keys = int8}};
      const std::string what = fmt::format("{}, {} K/V", p.resolved(16).describe(), kv_dtype_name(dtype));
      // Each side, one engine: the prompt without a policy (its blocks cached), the evicting request (every
      // eviction's kept sets recorded; an evicting sequence neither reads nor rewrites cached blocks), the prompt
      // again (a prefix hit).
      using KeptSets = std::vector<std::vector<uint32_t>>;
      const auto run = [&](const Model& model, std::vector<KeptSets>& kept) {
        test::EngineSession session(model, *tokenizer_, pool_, config);
        std::vector<test::EngineTrace> traces{session.run(test::greedy_request(prompt, 8))};
        RequestParams evicting = test::greedy_request(prompt, n);
        evicting.kv_policy = p;
        evicting.on_eviction = [&kept](const KvEvictionEvent& e) { kept.emplace_back(e.kept.begin(), e.kept.end()); };
        traces.push_back(session.run(std::move(evicting)));
        traces.push_back(session.run(test::greedy_request(prompt, 8)));
        return traces;
      };
      std::vector<KeptSets> cpu_kept, gpu_kept;
      const std::vector<test::EngineTrace> cpu_runs = run(*host_, cpu_kept), gpu_runs = run(*gpu_, gpu_kept);
      const test::EngineTrace &cpu = cpu_runs[1], &gpu = gpu_runs[1];
      EXPECT_GE(cpu_kept.size(), (n - 64) / 16) << what;
      EXPECT_TRUE(gpu_kept == cpu_kept) << what << ": the GPU evicts other positions";
      EXPECT_EQ(gpu_runs[2].tokens, gpu_runs[0].tokens) << what << ": the repeat";
      EXPECT_EQ(gpu_runs[2].tokens, cpu_runs[2].tokens) << what << ": the repeat";
      EXPECT_EQ(gpu_runs[2].result.cached_tokens, cpu_runs[2].result.cached_tokens) << what;
      EXPECT_GE(gpu_runs[2].result.cached_tokens, 32u) << what << ": the repeat must hit the prefix cache";
      ASSERT_EQ(gpu.tokens.size(), n) << what;
      EXPECT_EQ(gpu.tokens, cpu.tokens) << what;
      float bound = kGoldenBound;
      if (int8) {
        EngineConfig f32 = config;
        f32.kv.dtype = KvDType::kF32;
        f32.kv.rotate_keys = false;
        RequestParams evicting = test::greedy_request(prompt, n);
        evicting.kv_policy = p;
        const test::EngineTrace f32_run = test::trace_request(*host_, *tokenizer_, pool_, f32, std::move(evicting));
        bound = std::max(bound, 0.25f * worst_common_difference(cpu, f32_run));
      }
      EXPECT_LE(test::worst_logit_difference(gpu, cpu), bound) << what;
      EXPECT_LE(gpu.result.kv_blocks_held, 4u) << what;
      EXPECT_EQ(gpu.result.kv_blocks_held, cpu.result.kv_blocks_held) << what;
    }
  }
}

// DeepSeek-V2 on the GPU (MLA's latent cache, its absorbed and expanded forms; the experts routed on the device): the
// three synthetic shapes (a mixture of 8 experts choosing 2 with a shared one after a dense layer; all layers dense;
// queries through the low-rank pair) give the CPU's tokens with the same --mla-form, logits within the golden bound
// (measured up to 8e-6), and with an int8 latent within a quarter of what int8 moves the CPU's logits. Under auto a
// 120-token prompt in one chunk is expanded (at least kMlaExpandFromTokens) and the decode tokens absorbed; the forced
// forms run 40 tokens in chunks of 16, and on the GPU the absorbed form equals the expanded one.
TEST_F(GpuForward, DeepSeekV2GivesTheCpusTokensAndLogitsInEachMlaForm) {
  test::TempDir dir("gpu_forward_deepseek2");
  struct Case {
    MlaForm form;
    KvDType dtype;
    size_t prompt, chunk;
  };
  const Case cases[] = {{MlaForm::kAuto, KvDType::kF32, 120, 128},
                        {MlaForm::kAbsorbed, KvDType::kF32, 40, 16},
                        {MlaForm::kExpanded, KvDType::kF32, 40, 16},
                        {MlaForm::kAuto, KvDType::kInt8, 120, 128}};
  for (const char* preset : {"tiny-deepseek2", "tiny-deepseek2-dense", "tiny-deepseek2-qlora"}) {
    ASSERT_TRUE(write_synth_model(*synth_preset(preset), dir.file(std::string(preset) + ".gguf")));
    ASSERT_NO_FATAL_FAILURE(load(dir.file(std::string(preset) + ".gguf")));
    ASSERT_TRUE(host_->config().is_mla());
    test::EngineTrace forms[2];  // the GPU's absorbed and expanded runs
    for (const Case& k : cases) {
      const std::vector<TokenId> prompt = test::varied_prompt(k.prompt);
      const EngineConfig config{
          .max_batch_tokens = k.chunk, .max_seqs = 1, .kv = {.dtype = {k.dtype, k.dtype}}, .mla_form = k.form};
      const std::string what =
          fmt::format("{}, {} latent, {} form", preset, kv_dtype_name(k.dtype), mla_form_name(k.form));
      const test::EngineTrace cpu = trace(*host_, config, prompt, 16), gpu = trace(*gpu_, config, prompt, 16);
      EXPECT_EQ(gpu.tokens, cpu.tokens) << what;
      ASSERT_EQ(gpu.logits.size(), cpu.logits.size()) << what;
      float bound = kGoldenBound;
      if (k.dtype != KvDType::kF32) {
        EngineConfig f32 = config;
        f32.kv.dtype = KvDType::kF32;
        bound = std::max(bound, 0.25f * worst_common_difference(cpu, trace(*host_, f32, prompt, 16)));
      }
      EXPECT_LE(test::worst_logit_difference(gpu, cpu), bound) << what;
      if (k.form != MlaForm::kAuto) forms[k.form == MlaForm::kExpanded] = gpu;
    }
    // The two forms on the GPU: equal up to rounding, the same tokens.
    EXPECT_EQ(forms[1].tokens, forms[0].tokens) << preset;
    EXPECT_LE(test::worst_logit_difference(forms[1], forms[0]), kGoldenBound) << preset;
  }
}

// tiny-deepseek2 in Q4_0 (the experts stacked in blocks, read by the expert product): against the CPU's scalar path
// (dequantized rows times fp32 activations, the shaders' arithmetic; its fast path quantizes activations to int8) the
// golden bound holds, in both forms.
TEST_F(GpuForward, DeepSeekV2InQ4_0GivesTheCpusScalarLogits) {
  const Isa saved = isa_limit();
  set_isa_limit(Isa::kScalar);
  test::TempDir dir("gpu_forward_deepseek2_q4_0");
  SynthSpec spec = *synth_preset("tiny-deepseek2");
  spec.type = DType::kQ4_0;
  ASSERT_TRUE(write_synth_model(spec, dir.file("d.gguf")));
  ASSERT_NO_FATAL_FAILURE(load(dir.file("d.gguf")));
  for (MlaForm form : {MlaForm::kAbsorbed, MlaForm::kExpanded}) {
    const EngineConfig config{.max_batch_tokens = 16, .max_seqs = 1, .mla_form = form};
    const std::vector<TokenId> prompt = test::varied_prompt(30);
    const test::EngineTrace cpu = trace(*host_, config, prompt, 16), gpu = trace(*gpu_, config, prompt, 16);
    EXPECT_EQ(gpu.tokens, cpu.tokens) << mla_form_name(form);
    ASSERT_EQ(gpu.logits.size(), cpu.logits.size());
    EXPECT_LE(test::worst_logit_difference(gpu, cpu), kGoldenBound) << mla_form_name(form);
  }
  set_isa_limit(saved);
}

// Issue 42's last rule: what the CPU runs, the GPU runs, and what the CPU refuses the GPU refuses with the same words
// (the engine's capability table; the GPU model adds no refusal of its own). Over three architectures and the KV
// options one by one and combined (layouts, windows, one pool for all layers, eviction policies, element types, key
// groupings and rotation, the host tier, no prefix cache): Engine::create gives both devices the same status, and
// where it runs, a 12-token prompt and 20 tokens give the same tokens (the CPU's scalar kernels, whose arithmetic
// the shaders share: its SIMD int4 keys per channel, for one, round differently enough to turn a near tie).
TEST_F(GpuForward, EveryCombinationTheCpuRunsRunsOnTheGpuAndTheRestIsRefusedAlike) {
  const Isa saved = isa_limit();
  set_isa_limit(Isa::kScalar);
  test::TempDir dir("gpu_forward_combinations");
  SynthSpec gemma = *synth_preset("tiny-gemma3");
  gemma.sliding_window = 12;
  ASSERT_TRUE(write_synth_model(gemma, dir.file("gemma3.gguf")));
  ASSERT_TRUE(write_synth_model(*synth_preset("tiny-deepseek2"), dir.file("deepseek2.gguf")));
  const auto with = [](auto change) {
    KvOptions kv;
    change(kv);
    return kv;
  };
  const KvPolicyParams sinks{.kind = KvPolicyKind::kSinks, .budget = 24};
  const KvPolicyParams h2o{.kind = KvPolicyKind::kHeavyHitters, .budget = 24};
  const std::vector<std::pair<std::string, KvOptions>> variants{
      {"paged f32", {}},
      {"contiguous", with([](KvOptions& kv) { kv.layout = KvLayout::kContiguous; })},
      {"window 8", with([](KvOptions& kv) { kv.window = 8; })},
      {"one pool", with([](KvOptions& kv) { kv.hybrid = false; })},
      {"sinks", with([&](KvOptions& kv) { kv.policy = sinks; })},
      {"h2o, int8 per token", with([&](KvOptions& kv) {
         kv.policy = h2o;
         kv.dtype = KvDType::kInt8;
         kv.key_scales = KvScaleAxis::kPerToken;
       })},
      {"sinks, keys per channel", with([&](KvOptions& kv) {
         kv.policy = sinks;
         kv.dtype = KvDType::kInt8;
       })},
      {"int4 rotated", with([](KvOptions& kv) {
         kv.dtype = KvDType::kInt4;
         kv.rotate_keys = true;
       })},
      {"bf16 K, int8 V", with([](KvOptions& kv) {
         kv.dtype = {KvDType::kBF16, KvDType::kInt8};
       })},
      {"host tier, no prefix cache", with([](KvOptions& kv) {
         kv.tiers.host_bytes = 1 << 20;
         kv.prefix_caching = false;
       })},
  };
  size_t ran = 0, refused = 0;
  for (const std::string& path : {test::default_model_path(), dir.file("gemma3.gguf"), dir.file("deepseek2.gguf")}) {
    ASSERT_NO_FATAL_FAILURE(load(path));
    for (const auto& [name, kv] : variants) {
      const EngineConfig config{.max_batch_tokens = 8, .max_seqs = 1, .kv = kv};
      const std::string what = fmt::format("{}: {}", host_->config().architecture, name);
      auto cpu_engine = Engine::create(*host_, *tokenizer_, pool_, config);
      auto gpu_engine = Engine::create(*gpu_, *tokenizer_, pool_, config);
      ASSERT_EQ(gpu_engine.has_value(), cpu_engine.has_value())
          << what << ": " << (cpu_engine ? gpu_engine.status().message() : cpu_engine.status().message());
      if (!cpu_engine) {
        EXPECT_EQ(gpu_engine.status().message(), cpu_engine.status().message()) << what;
        ++refused;
        continue;
      }
      const std::vector<TokenId> prompt = test::varied_prompt(12);
      const test::EngineTrace cpu = trace(*host_, config, prompt, 20), gpu = trace(*gpu_, config, prompt, 20);
      EXPECT_EQ(gpu.tokens, cpu.tokens) << what;
      ++ran;
    }
  }
  EXPECT_GE(ran, 15u);     // measured 19 of 30
  EXPECT_GE(refused, 4u);  // the MLA cache with windows and policies; a model's windows with a policy
  set_isa_limit(saved);
}

TEST_F(GpuForward, AMissingDeviceIsRefusedByName) {
  ASSERT_NO_FATAL_FAILURE(load(test::default_model_path()));
  auto missing = make_gpu_model(*host_, 99);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("no Vulkan device 99"), std::string::npos) << missing.status().message();
}

// A fault on the device ends the requests of its step and nothing else: a prompt whose attention scratch (tokens x
// heads x visible slots x 4 bytes) exceeds one storage binding of the device is refused as a DeviceFault naming the
// bytes, the request ends with kDeviceError and that message, and the engine serves the next request.
TEST_F(GpuForward, AStepTheDeviceCannotHoldEndsItsRequestAndTheEngineGoesOn) {
  test::TempDir dir("gpu_forward_fault");
  SynthSpec spec{.layers = 1, .dim = 256, .heads = 64, .kv_heads = 64, .ffn = 256, .vocab = 512, .ctx = 2048};
  ASSERT_TRUE(write_synth_model(spec, dir.file("wide.gguf")));
  ASSERT_NO_FATAL_FAILURE(load(dir.file("wide.gguf")));
  auto list = list_gpu_devices();
  ASSERT_TRUE(list);
  const uint64_t range = (*list)[0].max_storage_buffer_range;
  // A prompt of n tokens in one step needs n x 64 x n x 4 bytes of scratch: past the range for n > sqrt(range / 256).
  const size_t n = static_cast<size_t>(std::sqrt(static_cast<double>(range) / 256.0)) + 64;
  if (n + 8 > spec.ctx) GTEST_SKIP() << "this device's bindings hold a whole context's scratch";
  test::EngineSession session(*gpu_, *tokenizer_, pool_, {.max_batch_tokens = n, .max_seqs = 2});
  const test::EngineTrace failed = session.run(test::greedy_request(test::varied_prompt(n), 4));
  EXPECT_EQ(failed.result.finish_reason, FinishReason::kDeviceError);
  EXPECT_NE(failed.result.finish_detail.find("exceeds one storage binding"), std::string::npos)
      << failed.result.finish_detail;
  EXPECT_TRUE(failed.tokens.empty());
  const test::EngineTrace next = session.run(test::greedy_request(test::varied_prompt(30), 4));
  EXPECT_EQ(next.result.finish_reason, FinishReason::kLength);
  EXPECT_EQ(next.tokens.size(), 4u);
  session.check();
}

}  // namespace
}  // namespace kvs
