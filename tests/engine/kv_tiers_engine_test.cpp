// KV offload tiers through the engine on the default model: blocks the pool evicts move to the host tier
// (and the disk tier) and come back instead of being recomputed; a restarted engine finds the disk tier's
// blocks; a KV format the blocks were not written in, a foreign directory, and injected disk faults
// (write and read errors, a full disk, short reads, flipped bits) mean recompute. Every output equals the
// request run alone without a cache (greedy ids, every logits row within the prefix cache's bound).
//
// Bound: a loaded block holds the bits the pool held (a byte copy, checksummed on disk), so a hit is a
// prefix cache hit and keeps its 1e-5 (tests/engine/prefix_cache_engine_test.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "default_model.h"
#include "engine_trace.h"
#include "gguf/gguf_test_util.h"
#include "kv/tiers/tier_test_util.h"

namespace kvs {
namespace {

constexpr float kLogitBound = 1e-5f;

using Fixture = test::DefaultModel;
using kvs::testing::TempDir;
using test::FaultyIo;

// The same request on a fresh engine without a prefix cache (nor tiers): the reference.
test::EngineTrace reference(Fixture& f, EngineConfig config, RequestParams params) {
  config.kv.prefix_caching = false;
  config.kv.tiers = {};
  config.kv_preempt = KvPreemptMode::kAuto;
  config.kv.blocks = 0;
  return test::trace_request(*f.model, *f.tokenizer, f.pool, config, std::move(params));
}

void expect_same_output(const test::EngineTrace& got, const test::EngineTrace& ref) {
  test::expect_cached_run_matches(got, ref, kLogitBound);
}

// One engine kept across requests (test::EngineSession checks the tiers' invariants after each run), and
// its tiers' figures.
class Session : public test::EngineSession {
 public:
  Session(Fixture& f, const EngineConfig& config) : EngineSession(*f.model, *f.tokenizer, f.pool, config) {}
  const KvTierMetrics* tier(std::string_view name) {
    tier_metrics_ = engine().metrics().kv_tiers;
    for (const KvTierMetrics& t : tier_metrics_)
      if (t.tier == name) return &t;
    return nullptr;
  }

 private:
  std::vector<KvTierMetrics> tier_metrics_;
};

// Bytes of one block of the default model's pool in `dtype` (what the tiers hold per block).
size_t block_bytes(Fixture& f, KvDTypes dtype = KvDType::kF32) {
  const EngineConfig probe{.kv = {.dtype = dtype, .tiers = {.host_bytes = size_t{1} << 30}}};
  auto e = Engine::create(*f.model, *f.tokenizer, f.pool, probe);
  EXPECT_TRUE(e) << e.status().message();
  return e ? (*e)->kv_tiers()->format().block_bytes : 0;
}

// Six 60-token prompts through a pool of 12 blocks: each evicts the ones before it.
std::vector<std::vector<TokenId>> six_prompts(Fixture& f) {
  std::vector<std::vector<TokenId>> prompts;
  for (uint64_t i = 0; i < 6; ++i) prompts.push_back(f.random_tokens(60, 300 + i));
  return prompts;
}

TEST(KvTiersEngine, EvictedBlocksComeBackFromTheHostTierInsteadOfBeingRecomputed) {
  Fixture f;
  const EngineConfig config{.max_seqs = 1, .kv = {.blocks = 12, .tiers = {.host_bytes = 64 * block_bytes(f)}}};
  Session session(f, config);
  const auto prompts = six_prompts(f);
  for (const auto& p : prompts) session.run(test::greedy_request(p, 20));
  const EngineMetrics before = session.engine().metrics();
  EXPECT_GT(before.kv_demoted_blocks_total, 0u);
  ASSERT_NE(session.tier("host"), nullptr);
  EXPECT_EQ(session.tier("host")->blocks_held, before.kv_demoted_blocks_total) << "every demoted block is kept";
  for (const auto& p : prompts) {
    const test::EngineTrace again = session.run(test::greedy_request(p, 20));
    // 59 tokens are looked up (the last is computed): three whole blocks, from the pool or the host tier.
    EXPECT_GE(again.result.cached_tokens, 48u);
    expect_same_output(again, reference(f, config, test::greedy_request(p, 20)));
  }
  const EngineMetrics after = session.engine().metrics();
  EXPECT_GE(after.prefix_cache_tier_hits_tokens_total, 3u * 48) << "the first prompts' blocks were all evicted";
  EXPECT_EQ(session.tier("host")->hits * 16, after.prefix_cache_tier_hits_tokens_total);
  EXPECT_GT(session.tier("host")->bytes_loaded, 0u);
  const std::string text = to_prometheus(after);
  EXPECT_NE(text.find("kvserve_kv_tier_bytes{tier=\"host\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("kvserve_kv_tier_hits_total{tier=\"host\"}"), std::string::npos);
  EXPECT_NE(text.find("kvserve_kv_tier_load_seconds_count{tier=\"host\"}"), std::string::npos);
}

// The same requests without tiers: the first prompts, evicted, are recomputed (what the tiers save).
TEST(KvTiersEngine, WithoutTiersTheEvictedPromptsAreRecomputed) {
  Fixture f;
  Session session(f, {.max_seqs = 1, .kv = {.blocks = 12}});
  const auto prompts = six_prompts(f);
  for (const auto& p : prompts) session.run(test::greedy_request(p, 20));
  EXPECT_EQ(session.run(test::greedy_request(prompts[0], 20)).result.cached_tokens, 0u);
  EXPECT_TRUE(session.engine().metrics().kv_tiers.empty());
}

// Chat turns of many conversations through a small pool: each turn's prompt is the conversation so far,
// whose blocks went down to the tiers while the other conversations ran.
TEST(KvTiersEngine, InterleavedConversationsReuseTheirTurnsFromTheTiers) {
  Fixture f;
  TempDir dir;
  const EngineConfig config{.max_seqs = 2,
                            .kv = {.blocks = 16,
                                   .tiers = {.host_bytes = 10 * block_bytes(f),
                                             .disk_directory = dir.file("kv"),
                                             .disk_bytes = 400 * block_bytes(f)}}};
  Session session(f, config);
  std::vector<std::vector<TokenId>> conversations;
  for (uint64_t c = 0; c < 5; ++c) conversations.push_back(f.random_tokens(30, 900 + c));
  size_t cached = 0, looked_up = 0;
  for (int turn = 0; turn < 3; ++turn) {
    for (size_t c = 0; c < conversations.size(); ++c) {
      SCOPED_TRACE("turn " + std::to_string(turn) + ", conversation " + std::to_string(c));
      auto& conversation = conversations[c];
      const test::EngineTrace t = session.run(test::greedy_request(conversation, 12));
      expect_same_output(t, reference(f, config, test::greedy_request(conversation, 12)));
      if (turn > 0) {
        cached += t.result.cached_tokens;
        looked_up += conversation.size() - 1;
      }
      conversation.insert(conversation.end(), t.tokens.begin(), t.tokens.end());
      const auto message = f.random_tokens(9, 50 + 10 * c + turn);
      conversation.insert(conversation.end(), message.begin(), message.end());
    }
  }
  // Every later turn finds the previous turns' whole blocks (the pool holds only 16 of them).
  EXPECT_GT(cached, looked_up / 2) << cached << " of " << looked_up;
  EXPECT_GT(session.engine().metrics().prefix_cache_tier_hits_tokens_total, 0u);
  EXPECT_GT(session.tier("disk")->bytes_stored, 0u) << "demoted blocks are written through to disk";
}

TEST(KvTiersEngine, ARestartedEngineHitsTheDiskTierAndAnotherKvFormatDoesNot) {
  Fixture f;
  TempDir dir;
  const size_t bytes = block_bytes(f);
  const EngineConfig config{
      .max_seqs = 1,
      .kv = {.blocks = 12,
             .tiers = {.host_bytes = 8 * bytes, .disk_directory = dir.file("kv"), .disk_bytes = 200 * bytes}}};
  const auto prompts = six_prompts(f);
  {
    Session first(f, config);
    for (const auto& p : prompts) first.run(test::greedy_request(p, 20));
  }  // closing writes what the pool still holds
  Session restarted(f, config);
  ASSERT_NE(restarted.tier("disk"), nullptr);
  EXPECT_GE(restarted.tier("disk")->blocks_held, 6u * 3) << "the whole prompt blocks of every request";
  EXPECT_EQ(restarted.tier("host")->blocks_held, 0u);
  for (const auto& p : {prompts[0], prompts[5]}) {
    const test::EngineTrace again = restarted.run(test::greedy_request(p, 20));
    EXPECT_EQ(again.result.cached_tokens, 48u) << "three whole blocks read back from disk";
    expect_same_output(again, reference(f, config, test::greedy_request(p, 20)));
  }
  EXPECT_EQ(restarted.engine().metrics().prefix_cache_tier_hits_tokens_total, 2u * 48);
  EXPECT_EQ(restarted.tier("disk")->hits, 6u);
  restarted.close();

  // fp16 K/V: the same tokens' blocks are another format, under their own directory: nothing to hit.
  EngineConfig f16 = config;
  f16.kv.dtype = KvDType::kF16;
  Session other_format(f, f16);
  ASSERT_NE(other_format.tier("disk"), nullptr);
  EXPECT_EQ(other_format.tier("disk")->blocks_held, 0u);
  const test::EngineTrace t = other_format.run(test::greedy_request(prompts[0], 20));
  EXPECT_EQ(t.result.cached_tokens, 0u);
  expect_same_output(t, reference(f, f16, test::greedy_request(prompts[0], 20)));
}

// The warm restart a user tries first: a disk tier and no host budget (so the host tier stages 8 blocks), a prompt of
// 25 blocks, stop, start again, the same prompt alone. The request waits while its prefix comes up disk -> host ->
// pool in waves (each wave's blocks go into the pool as cached blocks, which frees the host tier for the next) and
// then finds all of it: reading 24 blocks is cheaper than computing them.
TEST(KvTiersEngine, ARestartedEngineWithOnlyADiskTierLoadsAWholeLongPrefixBeforeItRuns) {
  Fixture f;
  TempDir dir;
  const size_t bytes = block_bytes(f);
  const EngineConfig config{.kv = {.tiers = {.disk_directory = dir.file("kv"), .disk_bytes = 200 * bytes}}};
  const auto prompt = f.random_tokens(400, 77);
  {
    Session first(f, config);
    EXPECT_EQ(first.run(test::greedy_request(prompt, 8)).result.cached_tokens, 0u);
    ASSERT_NE(first.tier("host"), nullptr);
    EXPECT_EQ(first.tier("host")->capacity_bytes, kMinHostBlocks * bytes) << "the host tier's least";
  }
  Session restarted(f, config);
  EXPECT_EQ(restarted.tier("disk")->blocks_held, 25u) << "the prompt's whole blocks";
  const test::EngineTrace again = restarted.run(test::greedy_request(prompt, 8));
  EXPECT_GE(again.result.cached_tokens, prompt.size() * 95 / 100);
  EXPECT_EQ(again.result.cached_tokens, 24u * 16) << "every whole block, from disk";
  expect_same_output(again, reference(f, config, test::greedy_request(prompt, 8)));
  const EngineMetrics m = restarted.engine().metrics();
  EXPECT_EQ(m.prefix_cache_tier_hits_tokens_total, 24u * 16);
  EXPECT_EQ(restarted.tier("disk")->hits, 24u);
  EXPECT_EQ(m.kv_load_timeouts_total, 0u);
  EXPECT_GT(m.kv_load_waits_total, 0u) << "the request waited for its prefix";
  EXPECT_GT(m.kv_load_stall_seconds_sum, 0.0) << "alone, the engine had nothing else to compute meanwhile";
  const std::string text = to_prometheus(m);
  EXPECT_NE(text.find("kvserve_kv_load_timeouts_total 0"), std::string::npos) << text;
}

// The bounded wait: with a load timeout of zero the request waits for nothing and computes what has not arrived;
// the timeout is counted, and the output is the same.
TEST(KvTiersEngine, APrefixLoadThatTimesOutIsCountedAndTheRestIsComputed) {
  Fixture f;
  TempDir dir;
  const size_t bytes = block_bytes(f);
  EngineConfig config{.kv = {.tiers = {.disk_directory = dir.file("kv"), .disk_bytes = 200 * bytes}}};
  const auto prompt = f.random_tokens(400, 78);
  {
    Session first(f, config);
    first.run(test::greedy_request(prompt, 8));
  }
  config.kv_load_timeout = std::chrono::milliseconds(0);
  Session restarted(f, config);
  const test::EngineTrace again = restarted.run(test::greedy_request(prompt, 8));
  EXPECT_LT(again.result.cached_tokens, 24u * 16) << "it did not wait for the whole prefix";
  expect_same_output(again, reference(f, config, test::greedy_request(prompt, 8)));
  EXPECT_EQ(restarted.engine().metrics().kv_load_timeouts_total, 1u);
}

// Steps slower than the load timeout (a slow device's prefill of other requests) do not end a wait whose reads keep
// arriving: the timeout is for a disk that finishes no read. The engine's clock moves 3 s a step against a timeout
// of 2 s, once the step's reads are done (as they would be during a step that long); the restarted request still
// loads its whole prefix.
TEST(KvTiersEngine, StepsSlowerThanTheTimeoutDoNotEndAWaitWhoseReadsArrive) {
  Fixture f;
  TempDir dir;
  const size_t bytes = block_bytes(f);
  ManualClock clock;
  clock.advance(std::chrono::seconds(1));
  EngineConfig config{.kv = {.tiers = {.disk_directory = dir.file("kv"), .disk_bytes = 200 * bytes}}};
  const auto prompt = f.random_tokens(400, 79);
  {
    Session first(f, config);
    first.run(test::greedy_request(prompt, 8));
  }
  config.clock = &clock;
  config.kv_load_timeout = std::chrono::milliseconds(2000);
  Session restarted(f, config);
  std::vector<TokenId> got;
  size_t cached = 0;
  auto id = restarted.engine().add_request(test::greedy_request(prompt, 8, false), [&](const RequestOutput& o) {
    got.insert(got.end(), o.new_tokens.begin(), o.new_tokens.end());
    if (o.finished) cached = o.cached_tokens;
  });
  ASSERT_TRUE(id) << id.status().message();
  size_t steps = 0;
  while (restarted.engine().step()) {
    // The reads started by this step finish during it, as they would during a long step; then its 3 s pass.
    while (restarted.engine().kv_tiers()->disk()->num_in_flight() > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    clock.advance(std::chrono::seconds(3));
    ++steps;
    restarted.check();
  }
  EXPECT_GT(steps, 3u) << "the prefix came up in waves, each a step";
  EXPECT_EQ(cached, 24u * 16) << "every whole block, from disk";
  EXPECT_EQ(got, reference(f, config, test::greedy_request(prompt, 8)).tokens);
  const EngineMetrics m = restarted.engine().metrics();
  EXPECT_EQ(m.kv_load_timeouts_total, 0u);
  EXPECT_GT(m.kv_load_wait_seconds_sum, 2.0) << "it waited past the timeout, in the engine's time";
}

// Faults on the disk, written and read: the blocks they touch are recomputed, outputs are unchanged.
TEST(KvTiersEngine, DiskFaultsMeanRecomputeAndTheSameOutput) {
  Fixture f;
  const size_t bytes = block_bytes(f);
  const auto prompts = six_prompts(f);
  using Fault = FaultyIo::Fault;
  for (const Fault fault :
       {Fault::kWriteError, Fault::kDiskFull, Fault::kReadError, Fault::kShortRead, Fault::kFlipBit}) {
    SCOPED_TRACE("fault " + std::to_string(static_cast<int>(fault)));
    TempDir dir;
    test::Logged logged;
    auto io = std::make_shared<FaultyIo>();
    const bool on_write = fault == Fault::kWriteError || fault == Fault::kDiskFull;
    const EngineConfig config{.max_seqs = 1,
                              .kv = {.blocks = 12,
                                     .tiers = {.host_bytes = 8 * bytes,
                                               .disk_directory = dir.file("kv"),
                                               .disk_bytes = 200 * bytes,
                                               .disk_io = io,
                                               .log = logged.sink()}}};
    {
      if (on_write) io->fault = fault;
      Session first(f, config);
      for (const auto& p : prompts) first.run(test::greedy_request(p, 20));
    }
    io->fault = Fault::kNone;
    Session restarted(f, config);  // its scan reads every header: a read fault from here on hits the loads
    if (!on_write) io->fault = fault;
    const test::EngineTrace again = restarted.run(test::greedy_request(prompts[0], 20));
    EXPECT_EQ(again.result.cached_tokens, 0u) << "nothing usable was on disk";
    expect_same_output(again, reference(f, config, test::greedy_request(prompts[0], 20)));
    const KvTierMetrics* disk = restarted.tier("disk");
    ASSERT_NE(disk, nullptr);
    if (on_write) {
      EXPECT_EQ(disk->blocks_held, 0u);
    } else {
      EXPECT_GT(disk->load_failures, 0u);
      EXPECT_TRUE(logged.has("failed to load")) << "the dropped block is logged";
    }
    io->fault = Fault::kNone;
    const test::EngineTrace third = restarted.run(test::greedy_request(prompts[0], 20));
    EXPECT_EQ(third.result.cached_tokens, 59u) << "the recomputed blocks are cached again";
    expect_same_output(third, again);
  }
}

TEST(KvTiersEngine, AForeignDirectoryIsLoggedLeftAloneAndTheHostTierServes) {
  Fixture f;
  TempDir dir;
  const std::string foreign = dir.file("photos");
  std::filesystem::create_directories(foreign);
  std::ofstream(foreign + "/holiday.jpg") << "not a KV block";
  test::Logged logged;
  const size_t bytes = block_bytes(f);
  Session session(f, {.max_seqs = 1,
                      .kv = {.blocks = 12,
                             .tiers = {.host_bytes = 64 * bytes,
                                       .disk_directory = foreign,
                                       .disk_bytes = 200 * bytes,
                                       .log = logged.sink()}}});
  EXPECT_TRUE(logged.has(foreign)) << "the line names the directory";
  EXPECT_TRUE(logged.has("running without a disk tier"));
  ASSERT_NE(session.engine().kv_tiers(), nullptr);
  EXPECT_EQ(session.engine().kv_tiers()->disk(), nullptr);
  const auto prompts = six_prompts(f);
  for (const auto& p : prompts) session.run(test::greedy_request(p, 20));
  EXPECT_EQ(session.run(test::greedy_request(prompts[0], 20)).result.cached_tokens, 48u) << "from the host tier";
  EXPECT_TRUE(std::filesystem::exists(foreign + "/holiday.jpg")) << "nothing of it is touched";
}

TEST(KvTiersEngine, TiersNeedThePagedLayoutAndThePrefixCache) {
  Fixture f;
  const KvTierConfig tiers{.host_bytes = size_t{1} << 24};
  auto contiguous =
      Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.layout = KvLayout::kContiguous, .tiers = tiers}});
  ASSERT_FALSE(contiguous);
  EXPECT_NE(contiguous.status().message().find("paged"), std::string::npos) << contiguous.status().message();
  auto no_cache = Engine::create(*f.model, *f.tokenizer, f.pool, {.kv = {.prefix_caching = false, .tiers = tiers}});
  ASSERT_FALSE(no_cache);
  EXPECT_NE(no_cache.status().message().find("prefix cache"), std::string::npos) << no_cache.status().message();
}

// Preemption with a host tier (engine/preemption.h): six requests of 70 + 50 tokens, 64 tokens a step,
// through a pool of 20 blocks. What one run of them gives: each request's generated ids, the engine's
// figures, and the host tier's pins left at the end.
struct PreemptionRun {
  std::vector<std::vector<TokenId>> tokens;
  EngineMetrics metrics;
  size_t pinned_after = 0;
};

std::vector<RequestParams> preempted_requests(Fixture& f) {
  std::vector<RequestParams> requests;
  for (uint64_t i = 0; i < 6; ++i) requests.push_back(test::greedy_request(f.random_tokens(70, 500 + i), 50, false));
  return requests;
}

EngineConfig preemption_config(Fixture& f, KvPreemptMode mode, size_t host_blocks = 200,
                               KvDTypes dtype = KvDType::kF32) {
  return {.max_batch_tokens = 64,
          .max_seqs = 6,
          .kv = {.blocks = 20, .dtype = dtype, .tiers = {.host_bytes = host_blocks * block_bytes(f, dtype)}},
          .kv_preempt = mode};
}

// Runs the requests at once (invariants after every step); `on_step` may act between steps.
PreemptionRun run_preempted(Fixture& f, const EngineConfig& config, const std::vector<RequestParams>& requests,
                            const std::function<void(Engine&, const PreemptionRun&)>& on_step = {}) {
  Session session(f, config);
  PreemptionRun run;
  run.tokens.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto id = session.engine().add_request(requests[i], [&run, i](const RequestOutput& o) {
      run.tokens[i].insert(run.tokens[i].end(), o.new_tokens.begin(), o.new_tokens.end());
    });
    EXPECT_TRUE(id) << id.status().message();
  }
  while (session.engine().step()) {
    session.check();
    if (::testing::Test::HasFailure()) return run;
    if (on_step) on_step(session.engine(), run);
  }
  run.metrics = session.engine().metrics();
  run.pinned_after = session.engine().kv_tiers()->host().num_pinned();
  const EngineMetrics& m = run.metrics;
  std::printf("%s: %llu preemptions, %llu swapped, %llu tokens recomputed, %llu loaded from the host tier\n",
              std::string(kv_preempt_mode_name(config.kv_preempt)).c_str(),
              static_cast<unsigned long long>(m.preemptions_total),
              static_cast<unsigned long long>(m.preemptions_swapped_total),
              static_cast<unsigned long long>(m.preempted_tokens_recomputed_total),
              static_cast<unsigned long long>(m.prefix_cache_tier_hits_tokens_total));
  return run;
}

void expect_outputs_alone(Fixture& f, const EngineConfig& config, const std::vector<RequestParams>& requests,
                          const PreemptionRun& run) {
  EXPECT_GT(run.metrics.preemptions_total, 0u) << "the pool should force preemptions";
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(run.tokens[i], reference(f, config, requests[i]).tokens) << "request " << i;
  EXPECT_EQ(run.pinned_after, 0u) << "every swap's pins were released";
}

// The preempted requests under `mode` (and a host tier of `host_blocks`, K/V in `dtype`), their outputs checked.
PreemptionRun run_checked(KvPreemptMode mode, size_t host_blocks = 200, KvDTypes dtype = KvDType::kF32) {
  Fixture f;
  const auto requests = preempted_requests(f);
  const EngineConfig config = preemption_config(f, mode, host_blocks, dtype);
  const PreemptionRun run = run_preempted(f, config, requests);
  expect_outputs_alone(f, config, requests, run);
  return run;
}

// Swap: every preempted request's blocks, its partial last one too, are kept in the host tier and loaded
// back: nothing it had computed is computed again.
TEST(KvTiersEngine, SwapPreemptionResumesWithNothingRecomputed) {
  const PreemptionRun run = run_checked(KvPreemptMode::kSwap);
  EXPECT_EQ(run.metrics.preemptions_swapped_total, run.metrics.preemptions_total);
  EXPECT_EQ(run.metrics.preempted_tokens_recomputed_total, 0u);
  EXPECT_GT(run.metrics.prefix_cache_tier_hits_tokens_total, 0u);
}

// Recompute: nothing is copied at preemption; the pool's cache (and what it demotes) keeps what it can and
// the partial blocks others took are computed again.
TEST(KvTiersEngine, RecomputePreemptionComputesWhatThePoolLostAgain) {
  const PreemptionRun run = run_checked(KvPreemptMode::kRecompute);
  EXPECT_EQ(run.metrics.preemptions_swapped_total, 0u);
  EXPECT_GT(run.metrics.preempted_tokens_recomputed_total, 0u);
}

// Keys quantized per channel, in groups of rows: a swap keeps the partial block's whole groups (the bits a
// miss computes), and the filling group's rows, which wait in a key tail, are computed again.
TEST(KvTiersEngine, SwapPreemptionOfInt8KeysRecomputesAtMostTheFillingGroup) {
  const PreemptionRun run = run_checked(KvPreemptMode::kSwap, 200, KvDType::kInt8);
  Fixture f;
  const KvTensorFormat keys =
      kv_format(engine_kv_spec(*f.model, preemption_config(f, KvPreemptMode::kSwap, 200, KvDType::kInt8))).k;
  ASSERT_EQ(keys.scale_axis, KvScaleAxis::kPerChannel);
  EXPECT_EQ(run.metrics.preemptions_swapped_total, run.metrics.preemptions_total);
  EXPECT_LE(run.metrics.preempted_tokens_recomputed_total, run.metrics.preemptions_total * (keys.group_size - 1));
}

// Auto measures both costs as it runs (copies between the pool and the host tier, prefill steps) and
// chooses by them; either way the outputs are the requests' alone.
TEST(KvTiersEngine, AutoPreemptionMeasuresBothCosts) {
  const PreemptionRun run = run_checked(KvPreemptMode::kAuto);
  EXPECT_GT(run.metrics.kv_copy_bytes_per_second, 0.0);
  EXPECT_GT(run.metrics.recompute_tokens_per_second, 0.0);
  EXPECT_LE(run.metrics.preemptions_swapped_total, run.metrics.preemptions_total);
}

// A host tier of 4 blocks cannot pin a victim's 5 or more: swap falls back to recompute.
TEST(KvTiersEngine, SwapFallsBackToRecomputeWhenTheHostTierCannotPinTheBlocks) {
  const PreemptionRun run = run_checked(KvPreemptMode::kSwap, 4);
  EXPECT_LT(run.metrics.preemptions_swapped_total, run.metrics.preemptions_total);
  EXPECT_GT(run.metrics.preempted_tokens_recomputed_total, 0u);
}

// A request aborted while swapped out lets its pins go; the others finish as alone.
TEST(KvTiersEngine, AbortingASwappedRequestReleasesItsPins) {
  Fixture f;
  const auto requests = preempted_requests(f);
  const EngineConfig config = preemption_config(f, KvPreemptMode::kSwap);
  std::optional<SeqId> aborted;
  size_t pinned_before = 0, pinned_after = 0;
  const PreemptionRun run = run_preempted(f, config, requests, [&](Engine& engine, const PreemptionRun& so_far) {
    if (aborted) return;
    for (uint64_t id = 1; id <= requests.size(); ++id) {
      // Waiting after it generated: preempted, and swapped out.
      if (!engine.kv().contains(SeqId{id}) && !so_far.tokens[id - 1].empty()) {
        aborted = SeqId{id};
        pinned_before = engine.kv_tiers()->host().num_pinned();
        engine.abort(*aborted);
        pinned_after = engine.kv_tiers()->host().num_pinned();
        return;
      }
    }
  });
  ASSERT_TRUE(aborted.has_value()) << "no request was preempted after it generated";
  EXPECT_GT(pinned_before, pinned_after) << "its kept blocks were pinned, and are no longer";
  EXPECT_EQ(run.pinned_after, 0u);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i + 1 == aborted->value) continue;
    EXPECT_EQ(run.tokens[i], reference(f, config, requests[i]).tokens) << "request " << i;
  }
}

// Randomized: requests from four shared system prompts arrive in waves into a tiny pool, a host tier of
// eight blocks and a small disk tier; invariants hold after every step, and every output equals the
// request run alone.
TEST(KvTiersEngine, RandomizedConcurrentRequestsWithTinyPoolAndTierBudgets) {
  Fixture f;
  TempDir dir;
  const size_t bytes = block_bytes(f);
  EngineConfig config{
      .max_batch_tokens = 48,
      .max_seqs = 4,
      .kv = {.blocks = 14,
             .tiers = {.host_bytes = 8 * bytes, .disk_directory = dir.file("kv"), .disk_bytes = 24 * bytes}}};
  std::mt19937_64 rng(2026);
  std::vector<std::vector<TokenId>> systems;
  for (uint64_t s = 0; s < 4; ++s) systems.push_back(f.random_tokens(20 + 17 * s, 40 + s));
  std::vector<RequestParams> requests;
  for (uint64_t i = 0; i < 18; ++i) {
    std::vector<TokenId> prompt = systems[rng() % systems.size()];
    const auto suffix = f.random_tokens(1 + rng() % 12, 1000 + i);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    requests.push_back(test::greedy_request(prompt, 4 + rng() % 32, false));
  }
  // Preemptions swap in the first run and recompute after the restart.
  for (int restart = 0; restart < 2; ++restart) {
    SCOPED_TRACE("restart " + std::to_string(restart));
    config.kv_preempt = restart == 0 ? KvPreemptMode::kSwap : KvPreemptMode::kRecompute;
    Session session(f, config);
    std::vector<std::vector<TokenId>> got(requests.size());
    size_t next = 0;
    const auto add = [&] {
      const size_t i = next++;
      auto id = session.engine().add_request(requests[i], [&, i](const RequestOutput& o) {
        got[i].insert(got[i].end(), o.new_tokens.begin(), o.new_tokens.end());
      });
      ASSERT_TRUE(id) << id.status().message();
    };
    for (;;) {
      if (next < requests.size() && rng() % 3 == 0) add();
      const bool busy = session.engine().step();
      session.check();
      if (::testing::Test::HasFailure()) return;
      if (!busy && next == requests.size()) break;
    }
    const EngineMetrics m = session.engine().metrics();
    std::printf("%llu preemptions, %llu swapped\n", static_cast<unsigned long long>(m.preemptions_total),
                static_cast<unsigned long long>(m.preemptions_swapped_total));
    EXPECT_EQ(m.kv_blocks_used, 0u);
    EXPECT_GT(m.kv_demoted_blocks_total, 0u);
    EXPECT_GT(m.preemptions_total, 0u);
    EXPECT_EQ(m.preemptions_swapped_total > 0, restart == 0);
    EXPECT_EQ(session.engine().kv_tiers()->host().num_pinned(), 0u);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(got[i], reference(f, config, requests[i]).tokens) << "request " << i;
    }
    if (restart == 1) {
      EXPECT_GT(m.prefix_cache_tier_hits_tokens_total, 0u);
    }
  }
}

}  // namespace
}  // namespace kvs
