// The offload hierarchy with the pool on the GPU (lavapipe here): GPU pool -> host tier -> disk tier -> GPU pool. The
// host tier's slabs are the device's host-tier memory and every block moves by the device's own copies
// (gpu/vulkan_kv_executor.h). Through the engine on the default model: evicted blocks come back from the host tier,
// a restarted engine loads a long prefix from disk before it runs, a disk tier written by a CPU run serves a GPU run
// and the other way round (the same block files: the model and the KV format are in the key), swap preemption
// resumes with nothing recomputed, and disk faults mean recompute. Every output's greedy ids equal the same request
// alone on the same device without a cache, and its logits are within kLogitBound of them.
//
// Bound: a block loaded back holds the bits the pool held (a byte copy, checksummed on disk), so a hit is a prefix
// cache hit: the computed tokens' attention sums the same fp32 terms in another split (the cached prefix and the new
// chunk apart), within 1e-4 of the no-cache run on either device (tests/gpu/gpu_forward_test.cpp's golden bound).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "engine/engine_trace.h"
#include "gpu/vulkan_kv_executor.h"
#include "gpu_model_fixture.h"
#include "kv/tiers/tier_test_util.h"
#include "parallel/in_process_communicator.h"
#include "parallel/tensor_parallel.h"
#include "test_support.h"

namespace kvs {
namespace {

constexpr float kLogitBound = 1e-4f;

class GpuKvTiers : public test::GpuModelTest {
 protected:
  void SetUp() override {
    GpuModelTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_NO_FATAL_FAILURE(load(test::default_model_path()));
    auto probe = Engine::create(*gpu_, *tokenizer_, pool_, {.kv = {.tiers = {.host_bytes = size_t{1} << 24}}});
    ASSERT_TRUE(probe) << probe.status().message();
    block_bytes_ = (*probe)->kv_tiers()->format().block_bytes;
  }
  // The request alone on `model` without a prefix cache or tiers: the reference.
  test::EngineTrace reference(const Model& model, EngineConfig config, const std::vector<TokenId>& prompt, size_t n) {
    config.kv.prefix_caching = false;
    config.kv.tiers = {};
    config.kv.blocks = 0;
    config.kv_preempt = KvPreemptMode::kAuto;
    return trace(model, config, prompt, n);
  }
  // `n` ids from `seed`: ordinary tokens (no BOS, EOS or unknown).
  std::vector<TokenId> random_tokens(size_t n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::vector<TokenId> out;
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<TokenId>(3 + rng() % (host_->config().vocab_size - 3)));
    return out;
  }
  const KvTierMetrics* tier(test::EngineSession& session, std::string_view name) {
    metrics_ = session.engine().metrics().kv_tiers;
    for (const KvTierMetrics& t : metrics_)
      if (t.tier == name) return &t;
    return nullptr;
  }

  size_t block_bytes_ = 0;
  std::vector<KvTierMetrics> metrics_;
};

// Six 60-token prompts through a pool of 12 blocks on the GPU, then again: each evicted the ones before it, which
// went down to the host tier (and through to disk) and come back up instead of being computed again.
TEST_F(GpuKvTiers, EvictedBlocksComeBackFromTheHostTierOntoTheDevice) {
  test::TempDir dir("gpu_kv_tiers_round_trip");
  const EngineConfig config{
      .max_seqs = 1,
      .kv = {.blocks = 12,
             .tiers = {
                 .host_bytes = 64 * block_bytes_, .disk_directory = dir.file("kv"), .disk_bytes = 200 * block_bytes_}}};
  test::EngineSession session(*gpu_, *tokenizer_, pool_, config);
  std::vector<std::vector<TokenId>> prompts;
  for (uint64_t i = 0; i < 6; ++i) prompts.push_back(random_tokens(60, 300 + i));
  for (const auto& p : prompts) session.run(test::greedy_request(p, 20));
  EXPECT_GT(session.engine().metrics().kv_demoted_blocks_total, 0u);
  for (const auto& p : prompts) {
    const test::EngineTrace again = session.run(test::greedy_request(p, 20));
    EXPECT_GE(again.result.cached_tokens, 48u) << "three whole blocks, from the pool or the host tier";
    test::expect_cached_run_matches(again, reference(*gpu_, config, p, 20), kLogitBound);
  }
  const EngineMetrics m = session.engine().metrics();
  EXPECT_GE(m.prefix_cache_tier_hits_tokens_total, 3u * 48);
  EXPECT_GT(tier(session, "host")->bytes_loaded, 0u);
  EXPECT_GT(tier(session, "disk")->bytes_stored, 0u) << "demoted blocks are written through to disk";
  EXPECT_GT(m.kv_copy_bytes_per_second, 0.0) << "the device's copies are timed";
}

// A disk tier is the same files whichever device wrote it: a CPU run's blocks serve a restarted GPU run with only a
// disk tier (a 25-block prompt, loaded whole before it runs), and the GPU run's serve a CPU run.
TEST_F(GpuKvTiers, ADiskTierWrittenOnOneDeviceServesARestartOnTheOther) {
  for (const bool cpu_first : {true, false}) {
    SCOPED_TRACE(cpu_first ? "CPU, then GPU" : "GPU, then CPU");
    test::TempDir dir("gpu_kv_tiers_restart");
    const EngineConfig config{.kv = {.tiers = {.disk_directory = dir.file("kv"), .disk_bytes = 200 * block_bytes_}}};
    const Model& first_model = cpu_first ? static_cast<const Model&>(*host_) : *gpu_;
    const Model& second_model = cpu_first ? *gpu_ : static_cast<const Model&>(*host_);
    const auto prompt = random_tokens(400, 77);
    {
      test::EngineSession first(first_model, *tokenizer_, pool_, config);
      EXPECT_EQ(first.run(test::greedy_request(prompt, 8)).result.cached_tokens, 0u);
    }
    test::EngineSession restarted(second_model, *tokenizer_, pool_, config);
    EXPECT_EQ(tier(restarted, "disk")->blocks_held, 25u);
    const test::EngineTrace again = restarted.run(test::greedy_request(prompt, 8));
    EXPECT_EQ(again.result.cached_tokens, 24u * 16) << "every whole block the lookup may take, from disk";
    test::expect_cached_run_matches(again, reference(second_model, config, prompt, 8), kLogitBound);
    EXPECT_EQ(restarted.engine().metrics().kv_load_timeouts_total, 0u);
  }
}

// Swap preemption from the GPU pool: six requests of 70 + 50 tokens, 64 a step, through 20 blocks; every preempted
// request's blocks go to the host tier and come back, nothing is computed again, and the outputs are the requests'
// alone.
TEST_F(GpuKvTiers, SwapPreemptionFromTheDeviceResumesWithNothingRecomputed) {
  const EngineConfig config{.max_batch_tokens = 64,
                            .max_seqs = 6,
                            .kv = {.blocks = 20, .tiers = {.host_bytes = 200 * block_bytes_}},
                            .kv_preempt = KvPreemptMode::kSwap};
  test::EngineSession session(*gpu_, *tokenizer_, pool_, config);
  std::vector<std::vector<TokenId>> prompts, got(6);
  for (uint64_t i = 0; i < 6; ++i) {
    prompts.push_back(random_tokens(70, 500 + i));
    auto id = session.engine().add_request(
        test::greedy_request(prompts.back(), 50, false),
        [&got, i](const RequestOutput& o) { got[i].insert(got[i].end(), o.new_tokens.begin(), o.new_tokens.end()); });
    ASSERT_TRUE(id) << id.status().message();
  }
  while (session.engine().step()) {
    session.check();
    if (HasFailure()) return;
  }
  const EngineMetrics m = session.engine().metrics();
  EXPECT_GT(m.preemptions_swapped_total, 0u);
  EXPECT_EQ(m.preemptions_swapped_total, m.preemptions_total);
  EXPECT_EQ(m.preempted_tokens_recomputed_total, 0u);
  EXPECT_EQ(session.engine().kv_tiers()->host().num_pinned(), 0u);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(got[i], reference(*gpu_, config, prompts[i], 50).tokens) << "request " << i;
}

// Faults on the disk under a GPU pool, written and read: the blocks they touch are recomputed, the output is the same.
TEST_F(GpuKvTiers, DiskFaultsUnderAGpuPoolMeanRecomputeAndTheSameOutput) {
  using Fault = test::FaultyIo::Fault;
  const auto prompt = random_tokens(60, 41);
  for (const Fault fault : {Fault::kWriteError, Fault::kReadError, Fault::kFlipBit}) {
    SCOPED_TRACE("fault " + std::to_string(static_cast<int>(fault)));
    test::TempDir dir("gpu_kv_tiers_faults");
    auto io = std::make_shared<test::FaultyIo>();
    test::Logged logged;
    const EngineConfig config{.max_seqs = 1,
                              .kv = {.blocks = 12,
                                     .tiers = {.host_bytes = 8 * block_bytes_,
                                               .disk_directory = dir.file("kv"),
                                               .disk_bytes = 200 * block_bytes_,
                                               .disk_io = io,
                                               .log = logged.sink()}}};
    const bool on_write = fault == Fault::kWriteError;
    {
      if (on_write) io->fault = fault;
      test::EngineSession first(*gpu_, *tokenizer_, pool_, config);
      first.run(test::greedy_request(prompt, 12));
    }
    io->fault = Fault::kNone;
    test::EngineSession restarted(*gpu_, *tokenizer_, pool_, config);
    if (!on_write) io->fault = fault;
    const test::EngineTrace again = restarted.run(test::greedy_request(prompt, 12));
    EXPECT_EQ(again.result.cached_tokens, 0u) << "nothing usable was on disk";
    test::expect_cached_run_matches(again, reference(*gpu_, config, prompt, 12), kLogitBound);
    if (on_write) {
      EXPECT_EQ(tier(restarted, "disk")->blocks_held, 0u);
    } else {
      EXPECT_GT(tier(restarted, "disk")->load_failures, 0u);
    }
  }
}

// The device loses the submission that loads a prefix back from the host tier (as a lost device would: nothing of it
// moved, so the pool blocks it was to fill still hold other prompts' K/V). The engine trusts nothing cached any more:
// the request computes again from its tokens, its output is the request's alone, and the loss is counted and logged.
TEST_F(GpuKvTiers, ALostTransferMeansRecomputeNeverStaleBlocks) {
  test::Logged logged;
  const EngineConfig config{.max_seqs = 1,
                            .kv = {.blocks = 12, .tiers = {.host_bytes = 64 * block_bytes_, .log = logged.sink()}}};
  test::EngineSession session(*gpu_, *tokenizer_, pool_, config);
  std::vector<std::vector<TokenId>> prompts;
  for (uint64_t i = 0; i < 4; ++i) prompts.push_back(random_tokens(60, 700 + i));
  for (const auto& p : prompts) session.run(test::greedy_request(p, 20));
  ASSERT_GT(tier(session, "host")->blocks_held, 0u) << "the first prompt's blocks went down to the host tier";
  auto& executor = dynamic_cast<VulkanKvExecutor&>(session.engine().kv_executor());
  executor.inject_lost_submissions(1);
  const test::EngineTrace lost = session.run(test::greedy_request(prompts[0], 20));
  test::expect_cached_run_matches(lost, reference(*gpu_, config, prompts[0], 20), kLogitBound);
  EXPECT_EQ(session.engine().metrics().kv_transfers_lost_total, 1u);
  EXPECT_TRUE(logged.has("a KV move failed")) << "the loss is logged";
  // The pool and the tier work on: the prompt hits its blocks again.
  const test::EngineTrace again = session.run(test::greedy_request(prompts[0], 20));
  EXPECT_GE(again.result.cached_tokens, 48u);
  test::expect_cached_run_matches(again, reference(*gpu_, config, prompts[0], 20), kLogitBound);
}

// Randomized: requests from three shared system prompts arrive in waves into a GPU pool of 14 blocks, a host tier of
// 8 and a disk tier of 24; preemptions swap, then after a restart recompute, then swap while the device loses every
// fifth step's moves. The KV manager's and the tiers' invariants hold after every step, nothing stays pinned, and
// every output equals the request alone on the device.
TEST_F(GpuKvTiers, RandomizedRequestsThroughATinyGpuPoolAndTinyTiers) {
  test::TempDir dir("gpu_kv_tiers_random");
  EngineConfig config{
      .max_batch_tokens = 48,
      .max_seqs = 4,
      .kv = {.blocks = 14,
             .tiers = {
                 .host_bytes = 8 * block_bytes_, .disk_directory = dir.file("kv"), .disk_bytes = 24 * block_bytes_}}};
  std::mt19937_64 rng(2027);
  std::vector<std::vector<TokenId>> systems;
  for (uint64_t s = 0; s < 3; ++s) systems.push_back(random_tokens(20 + 17 * s, 40 + s));
  std::vector<std::vector<TokenId>> prompts;
  std::vector<size_t> lengths;
  for (uint64_t i = 0; i < 14; ++i) {
    std::vector<TokenId> prompt = systems[rng() % systems.size()];
    const auto suffix = random_tokens(1 + rng() % 12, 1000 + i);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    prompts.push_back(prompt);
    lengths.push_back(8 + rng() % 32);
  }
  std::vector<std::vector<TokenId>> want;
  for (size_t i = 0; i < prompts.size(); ++i) want.push_back(reference(*gpu_, config, prompts[i], lengths[i]).tokens);
  for (int restart = 0; restart < 3; ++restart) {
    SCOPED_TRACE("restart " + std::to_string(restart));
    config.kv_preempt = restart == 1 ? KvPreemptMode::kRecompute : KvPreemptMode::kSwap;
    test::EngineSession session(*gpu_, *tokenizer_, pool_, config);
    auto& executor = dynamic_cast<VulkanKvExecutor&>(session.engine().kv_executor());
    std::vector<std::vector<TokenId>> got(prompts.size());
    size_t next = 0;
    for (size_t step = 0;; ++step) {
      if (restart == 2 && step % 5 == 4) executor.inject_lost_submissions(1);
      if (next < prompts.size() && rng() % 3 == 0) {
        const size_t i = next++;
        auto id = session.engine().add_request(test::greedy_request(prompts[i], lengths[i], false),
                                               [&got, i](const RequestOutput& o) {
                                                 got[i].insert(got[i].end(), o.new_tokens.begin(), o.new_tokens.end());
                                               });
        ASSERT_TRUE(id) << id.status().message();
      }
      const bool busy = session.engine().step();
      session.check();
      if (HasFailure()) return;
      if (!busy && next == prompts.size()) break;
    }
    const EngineMetrics m = session.engine().metrics();
    EXPECT_EQ(m.kv_blocks_used, 0u);
    EXPECT_GT(m.kv_demoted_blocks_total, 0u);
    EXPECT_GT(m.preemptions_total, 0u);
    if (restart < 2) {
      EXPECT_EQ(m.preemptions_swapped_total > 0, restart == 0);
    }
    EXPECT_EQ(m.kv_transfers_lost_total > 0, restart == 2);
    EXPECT_EQ(session.engine().kv_tiers()->host().num_pinned(), 0u);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
  }
}

// Under tensor parallelism on the GPU (two ranks on device 0, threads of this process): rank 0's offload planner
// decides and every rank moves its KV heads' share of each block between its GPU pool and its own host tier slabs
// (the device's host-tier memory) by the device's copies. Prompts that come back after the pool evicted them load
// their blocks from the tier; the greedy ids are the whole model's on the device with the same tiers.
TEST_F(GpuKvTiers, UnderTensorParallelismEveryRankMovesItsShareOnTheDevice) {
  const EngineConfig config{.max_seqs = 1, .kv = {.blocks = 12, .tiers = {.host_bytes = 64 * block_bytes_}}};
  std::vector<std::vector<TokenId>> prompts;
  for (uint64_t round = 0; round < 2; ++round)
    for (uint64_t i = 0; i < 5; ++i) prompts.push_back(random_tokens(60, 700 + i));
  const auto run_all = [&](const Model& model, ThreadPool& pool, EngineMetrics& metrics) {
    std::vector<std::vector<TokenId>> out;
    test::EngineSession session(model, *tokenizer_, pool, config);
    for (const auto& p : prompts) out.push_back(session.run(test::greedy_request(p, 12)).tokens);
    metrics = session.engine().metrics();
    return out;
  };
  EngineMetrics whole_metrics, split_metrics;
  const auto whole = run_all(*gpu_, pool_, whole_metrics);

  auto comms = InProcessGroup::make(2);
  std::vector<std::unique_ptr<DecoderModel>> shards;
  std::vector<std::unique_ptr<Model>> on_gpu;
  for (size_t r = 0; r < 2; ++r) {
    auto shard = DecoderModel::load(test::default_model_path(), WeightPacking::kNone, comms[r].get());
    ASSERT_TRUE(shard) << shard.status().message();
    shards.push_back(std::move(shard).value());
    auto gpu = make_gpu_model(*shards.back(), 0);
    ASSERT_TRUE(gpu) << gpu.status().message();
    on_gpu.push_back(std::move(gpu).value());
  }
  ThreadPool root_pool(1), worker_pool(1);
  Status worker;
  std::thread worker_thread([&] { worker = run_tensor_parallel_worker(*on_gpu[1], worker_pool, *comms[1]); });
  const auto split = run_all(*on_gpu[0], root_pool, split_metrics);
  TensorParallelDriver::end_all(*comms[0]);
  worker_thread.join();
  EXPECT_TRUE(worker.is_ok()) << worker.message();
  EXPECT_EQ(split, whole);
  EXPECT_GT(split_metrics.kv_demoted_blocks_total, 0u);
  EXPECT_GE(split_metrics.prefix_cache_tier_hits_tokens_total, 5u * 48) << "every returning prompt's blocks";
  EXPECT_EQ(split_metrics.prefix_cache_tier_hits_tokens_total, whole_metrics.prefix_cache_tier_hits_tokens_total);
}

}  // namespace
}  // namespace kvs
