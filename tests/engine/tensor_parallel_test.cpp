// Tensor parallelism in process (one thread per rank, parallel/in_process_communicator.h): the model split over 2 and
// 4 ranks (8 with KV heads replicated) gives the greedy ids of the whole model on the default model and on
// synthetic MHA, GQA and MQA models, with every logits row within a bound; each rank holds 1/N of the KV cache
// (or the replicated share); batching, preemption, prefix hits (partial-block copies), int8 K/V and an
// attention-sink policy's compactions run unchanged; a model that does not split, and what is not supported
// yet, are refused on every rank with the reason.
//
// Bounds: a row-parallel projection's output is the sum of N partial dot products (each over 1/N of the inputs)
// instead of one, so each of the two per layer differs by fp32 rounding of its terms, ~1e-7 relative; over a few
// layers, and logits of magnitude ~10, the differences measured 1e-6..1.4e-5: kFloatBound leaves a sevenfold
// margin. Where values are rounded to int8 on the way (Q8_0 weights quantize their input rows; int8 K/V), that
// last-bit difference can flip one value's rounding by a step of its block's max / 127, which the layers after
// carry to the logits: measured 1.6e-3 (int8 K/V) and 3.1e-3 (Q8_0); kInt8Bound = 1e-2.
#include "parallel/tensor_parallel.h"

#include <gtest/gtest.h>

#include <thread>

#include "default_model.h"
#include "engine_trace.h"
#include "gguf/gguf_test_util.h"
#include "model/synth.h"
#include "parallel/in_process_communicator.h"

namespace kvs {
namespace {

constexpr float kFloatBound = 1e-4f;
constexpr float kInt8Bound = 1e-2f;

// N ranks of one model file: a shard each (a thread pool of one thread each), workers on threads of their own
// while `fn` runs an engine on rank 0's shard.
class TpGroup {
 public:
  TpGroup(const std::string& path, size_t n) : comms_(InProcessGroup::make(n)) {
    for (size_t r = 0; r < n; ++r) {
      auto m = DecoderModel::load(path, WeightPacking::kForCpu, comms_[r].get());
      if (!m) {
        status_ = m.status();
        return;
      }
      shards_.push_back(std::move(m).value());
      pools_.push_back(std::make_unique<ThreadPool>(1));
    }
  }
  const Status& status() const { return status_; }
  const DecoderModel& shard(size_t r) const { return *shards_[r]; }
  ThreadPool& root_pool() { return *pools_[0]; }

  // The workers serve rank 0's engines while fn() drives them from rank 0; returns what the workers returned
  // (rank order) once rank 0 ended them.
  template <typename Fn>
  std::vector<Status> run(Fn fn) {
    std::vector<Status> results(shards_.size());
    std::vector<std::thread> workers;
    for (size_t r = 1; r < shards_.size(); ++r)
      workers.emplace_back([&, r] { results[r] = run_tensor_parallel_worker(*shards_[r], *pools_[r], *comms_[r]); });
    fn();
    TensorParallelDriver::end_all(*comms_[0]);
    for (auto& w : workers) w.join();
    return results;
  }

 private:
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::unique_ptr<DecoderModel>> shards_;
  std::vector<std::unique_ptr<ThreadPool>> pools_;
  Status status_;
};

// Every request on one engine at once; each request's generated ids and logits rows.
std::vector<test::EngineTrace> run_all(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                       const EngineConfig& config, const std::vector<RequestParams>& requests,
                                       EngineMetrics* metrics = nullptr) {
  std::vector<test::EngineTrace> traces(requests.size());
  auto engine = Engine::create(model, tokenizer, pool, config);
  EXPECT_TRUE(engine) << engine.status().message();
  if (!engine) return traces;
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestParams p = requests[i];
    p.on_logits = [&traces, i](size_t position, std::span<const float> logits) {
      traces[i].logits[position].assign(logits.begin(), logits.end());
    };
    auto id = (*engine)->add_request(std::move(p), [&traces, i](const RequestOutput& o) {
      traces[i].tokens.insert(traces[i].tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    });
    EXPECT_TRUE(id) << id.status().message();
  }
  while ((*engine)->step()) {
    const Status s = (*engine)->kv().check_invariants();
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
  if (metrics) *metrics = (*engine)->metrics();
  return traces;
}

// The requests on the whole model, then split over n ranks: the same greedy ids, logits within the bound, and
// each rank's KV bytes = the whole model's x (its KV heads / all KV heads). Returns rank 0's engine metrics.
EngineMetrics expect_split_matches_whole(const std::string& path, size_t n, const EngineConfig& config,
                                         const std::vector<RequestParams>& requests, float bound = kFloatBound) {
  SCOPED_TRACE(::testing::Message() << path << " over " << n << " ranks");
  EngineMetrics metrics;
  auto whole = DecoderModel::load(path);
  EXPECT_TRUE(whole) << whole.status().message();
  if (!whole) return metrics;
  auto tokenizer = Tokenizer::from_gguf(whole.value()->file());
  EXPECT_TRUE(tokenizer) << tokenizer.status().message();
  if (!tokenizer) return metrics;
  ThreadPool pool(1);
  const auto expected = run_all(**whole, *tokenizer, pool, config, requests);
  size_t whole_kv_bytes = 0;
  {
    auto e = Engine::create(**whole, *tokenizer, pool, config);
    EXPECT_TRUE(e);
    if (!e) return metrics;
    whole_kv_bytes = (*e)->kv_storage_bytes();
  }

  TpGroup group(path, n);
  EXPECT_TRUE(group.status().is_ok()) << group.status().message();
  if (!group.status().is_ok()) return metrics;
  std::vector<test::EngineTrace> got;
  const std::vector<Status> workers =
      group.run([&] { got = run_all(group.shard(0), *tokenizer, group.root_pool(), config, requests, &metrics); });
  for (size_t r = 1; r < n; ++r) EXPECT_TRUE(workers[r].is_ok()) << "rank " << r << ": " << workers[r].message();
  float worst = 0.0f;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
    worst = std::max(worst, test::worst_logit_difference(got[i], expected[i]));
  }
  std::printf("%s, %zu ranks: worst logit difference %.3g, %llu preemptions\n", path.c_str(), n, worst,
              static_cast<unsigned long long>(metrics.preemptions_total));
  EXPECT_LE(worst, bound);
  const ModelConfig& c = whole.value()->config();
  const ShardRanges& ranges = group.shard(0).shard_ranges();
  EXPECT_EQ(ranges.kv_heads * n, std::max(c.num_kv_heads, n));
  // Per-rank KV bytes: the whole model's pool in the same budget, of this rank's KV heads. With a block count
  // given, exactly kv_heads / num_kv_heads of the whole model's.
  auto layout = engine_kv_layout(group.shard(0), config);
  EXPECT_TRUE(layout);
  if (!layout) return metrics;
  size_t rank_bytes = 0;
  for (const KvCacheConfig& g : layout->groups) rank_bytes += KvStorage(g.spec, g.num_blocks, g.num_key_tails).bytes();
  if (config.kv.blocks > 0) {
    EXPECT_EQ(rank_bytes * c.num_kv_heads, whole_kv_bytes * ranges.kv_heads);
  }
  return metrics;
}

std::vector<RequestParams> mixed_requests(const test::DefaultModel& f, size_t count, size_t prompt, size_t generate) {
  std::vector<RequestParams> out;
  for (uint64_t i = 0; i < count; ++i)
    out.push_back(test::greedy_request(f.random_tokens(prompt + 7 * i, 40 + i), generate));
  return out;
}

TEST(TensorParallel, TheDefaultModelSplitOverTwoAndFourRanksGivesTheSameGreedyIds) {
  test::DefaultModel f;
  const auto requests = mixed_requests(f, 3, 20, 12);
  for (size_t n : {2u, 4u}) expect_split_matches_whole(test::default_model_path(), n, {.kv = {.blocks = 64}}, requests);
}

// Synthetic Llamas of each attention family, f32 and Q8_0 (head width 32: a rank's columns are whole blocks).
TEST(TensorParallel, MhaGqaAndMqaModelsSplitAndMqaReplicatesItsKvHead) {
  test::DefaultModel f;
  kvs::testing::TempDir dir;
  const auto requests = mixed_requests(f, 2, 24, 10);
  for (const auto& [kv_heads, type, ranks] : std::vector<std::tuple<uint32_t, DType, size_t>>{
           {4, DType::kF32, 4}, {2, DType::kQ8_0, 2}, {2, DType::kF32, 4}, {1, DType::kF32, 2}}) {
    SynthSpec spec{.layers = 2, .dim = 128, .heads = 4, .kv_heads = kv_heads, .ffn = 256, .vocab = 512, .type = type};
    const std::string path = dir.file(fmt::format("kv{}-{}.gguf", kv_heads, dtype_name(type)));
    ASSERT_TRUE(write_synth_model(spec, path).is_ok());
    expect_split_matches_whole(path, ranks, {.kv = {.blocks = 48}}, requests,
                               type == DType::kF32 ? kFloatBound : kInt8Bound);
  }
}

// Batching with preemption, prefix hits with partial-block copies, int8 K/V, an attention-sink policy whose
// compactions every rank applies to its own heads, and sliding windows.
TEST(TensorParallel, PagingPreemptionPrefixHitsInt8SinksAndWindowsRunUnchanged) {
  test::DefaultModel f;
  std::vector<RequestParams> requests;
  const auto shared = f.random_tokens(37, 7);
  for (uint64_t i = 0; i < 5; ++i) {
    std::vector<TokenId> prompt = shared;
    const auto own = f.random_tokens(5 + 3 * i, 90 + i);
    prompt.insert(prompt.end(), own.begin(), own.end());
    requests.push_back(test::greedy_request(prompt, 24));
  }
  const EngineMetrics paged = expect_split_matches_whole(
      test::default_model_path(), 2,
      {.max_batch_tokens = 32, .max_seqs = 5, .kv = {.blocks = 16, .dtype = KvDType::kInt8}}, requests, kInt8Bound);
  EXPECT_GT(paged.preemptions_total, 0u);
  EXPECT_GT(paged.prefix_cache_hits_tokens_total, 0u);
  EngineConfig sinks{.kv = {.blocks = 64, .key_scales = KvScaleAxis::kPerToken}};
  sinks.kv.policy = {.kind = KvPolicyKind::kSinks, .budget = 32, .sinks = 4};
  const EngineMetrics evicted = expect_split_matches_whole(test::default_model_path(), 2, sinks,
                                                           {test::greedy_request(f.random_tokens(20, 3), 40)});
  EXPECT_GT(evicted.kv_evictions_total, 0u);
  // A sliding window of 24 tokens over every layer (the window's blocks freed as it moves on), with a request's own
  // narrower window beside it.
  std::vector<RequestParams> windowed = {test::greedy_request(f.random_tokens(30, 8), 40),
                                         test::greedy_request(f.random_tokens(12, 9), 40)};
  windowed[1].kv_window = 10;
  expect_split_matches_whole(test::default_model_path(), 2, {.kv = {.blocks = 64, .window = 24}}, windowed);
}

// Heavy hitters (H2O) rank slots by the attention each KV head's query heads gave them: every rank adds its own
// heads' mass, an integer all-reduce sums them to rank 0 (per-head sets: each rank compacts its own heads' rows),
// so the split model evicts the tokens the whole one evicts: the same ids, logits within the bound. The MQA model
// over 2 ranks replicates its one KV head: each rank adds the mass of its own query heads to it.
TEST(TensorParallel, HeavyHitterScoresAreSummedOverTheRanks) {
  test::DefaultModel f;
  kvs::testing::TempDir dir;
  SynthSpec mqa{.layers = 2, .dim = 128, .heads = 4, .kv_heads = 1, .ffn = 256, .vocab = 512, .type = DType::kF32};
  const std::string mqa_path = dir.file("mqa.gguf");
  ASSERT_TRUE(write_synth_model(mqa, mqa_path).is_ok());
  for (const KvScoreScope scope : {KvScoreScope::kPerHead, KvScoreScope::kPooled}) {
    EngineConfig config{.kv = {.blocks = 64, .key_scales = KvScaleAxis::kPerToken}};
    config.kv.policy = {.kind = KvPolicyKind::kHeavyHitters, .budget = 32, .recent = 4, .scores = scope};
    const std::vector<RequestParams> requests = {test::greedy_request(f.random_tokens(20, 5), 48),
                                                 test::greedy_request(f.random_tokens(45, 6), 30)};
    for (size_t n : {2u, 4u}) {
      const EngineMetrics m = expect_split_matches_whole(test::default_model_path(), n, config, requests);
      EXPECT_GT(m.kv_evictions_total, 0u);
    }
    expect_split_matches_whole(mqa_path, 2, config, requests);
  }
}

// Two engines open at once on the split model (bench interleaves a paged and a contiguous one), stepped in turn,
// with a third one created and closed between their steps: each gives what its engine on the whole model gives.
TEST(TensorParallel, EnginesOpenSideBySideEachGiveTheWholeModelsOutput) {
  test::DefaultModel f;
  const std::vector<EngineConfig> configs = {{.kv = {.blocks = 32}},
                                             {.kv = {.layout = KvLayout::kContiguous, .dtype = KvDType::kInt8}}};
  std::vector<RequestParams> requests;
  for (uint64_t i = 0; i < configs.size(); ++i)
    requests.push_back(test::greedy_request(f.random_tokens(15 + 6 * i, 60 + i), 20));
  std::vector<std::vector<TokenId>> expected;
  ThreadPool pool(1);
  for (size_t i = 0; i < configs.size(); ++i)
    expected.push_back(run_all(*f.model, *f.tokenizer, pool, configs[i], {requests[i]})[0].tokens);

  TpGroup group(test::default_model_path(), 2);
  ASSERT_TRUE(group.status().is_ok()) << group.status().message();
  std::vector<std::vector<TokenId>> got(configs.size());
  const auto workers = group.run([&] {
    std::vector<std::unique_ptr<Engine>> engines;
    for (size_t i = 0; i < configs.size(); ++i) {
      auto e = Engine::create(group.shard(0), *f.tokenizer, group.root_pool(), configs[i]);
      ASSERT_TRUE(e) << e.status().message();
      engines.push_back(std::move(e).value());
      auto id = engines[i]->add_request(requests[i], [&got, i](const RequestOutput& o) {
        got[i].insert(got[i].end(), o.new_tokens.begin(), o.new_tokens.end());
      });
      ASSERT_TRUE(id) << id.status().message();
    }
    for (bool busy = true; busy;) {
      busy = false;
      for (auto& e : engines) busy = e->step() || busy;
      run_all(group.shard(0), *f.tokenizer, group.root_pool(), {.kv = {.blocks = 8}}, {});  // opens and closes one
    }
  });
  EXPECT_TRUE(workers[1].is_ok()) << workers[1].message();
  for (size_t i = 0; i < configs.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "engine " << i;
}

TEST(TensorParallel, WhatDoesNotSplitOrIsNotSupportedIsRefusedOnEveryRank) {
  kvs::testing::TempDir dir;
  // 3 ranks: the default model's 8 query heads do not split.
  auto comms = InProcessGroup::make(3);
  auto shard = DecoderModel::load(test::default_model_path(), WeightPacking::kForCpu, comms[0].get());
  ASSERT_FALSE(shard);
  EXPECT_NE(shard.status().message().find("query heads do not split evenly into 3"), std::string::npos)
      << shard.status().message();
  // Q8_0 with 8-wide heads over 8 ranks: a rank's one head is 8 columns of the attention output, a quarter block.
  SynthSpec narrow{.layers = 1, .dim = 64, .heads = 8, .kv_heads = 8, .ffn = 256, .vocab = 512, .type = DType::kQ8_0};
  const std::string path = dir.file("narrow.gguf");
  const Status written = write_synth_model(narrow, path);
  ASSERT_TRUE(written.is_ok()) << written.message();
  auto eight = InProcessGroup::make(8);
  auto cut = DecoderModel::load(path, WeightPacking::kForCpu, eight[0].get());
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.status().message().find("cuts a block"), std::string::npos) << cut.status().message();
  // A disk tier would hold one rank's share of each block: rank 0 says so, and the worker stops with it.
  TpGroup group(test::default_model_path(), 2);
  ASSERT_TRUE(group.status().is_ok());
  test::DefaultModel f;
  const EngineConfig disk{
      .kv = {
          .tiers = {.host_bytes = size_t{1} << 24, .disk_directory = dir.file("kv"), .disk_bytes = size_t{1} << 24}}};
  Status engine_status;
  const auto workers = group.run(
      [&] { engine_status = Engine::create(group.shard(0), *f.tokenizer, group.root_pool(), disk).status(); });
  EXPECT_NE(engine_status.message().find("a KV disk tier and tensor parallelism (--tp 2) do not combine"),
            std::string::npos)
      << engine_status.message();
  EXPECT_NE(workers[1].message().find("rank 0 failed"), std::string::npos) << workers[1].message();
  EXPECT_NE(workers[1].message().find("use --kv-host alone"), std::string::npos) << "every rank hears rank 0's reason";
}

// A host tier under tensor parallelism: rank 0's offload planner decides, and every rank moves its own heads' share
// of each block to and from the same host tier slots (the KV op log), so the split model gives the whole model's
// output with the same tiers. Prompts that come back after the pool evicted them load their blocks from the tier
// (one sequence at a time through a pool of 12 blocks), and requests preempted for lack of blocks are swapped out to
// the tier and loaded back. A worker that loaded nothing (or the wrong slot) would attend over other K/V for its
// heads, and the logits would differ by far more than the bound.
TEST(TensorParallel, HostTierDemotionsLoadsAndSwapsMoveEveryRanksShare) {
  test::DefaultModel f;
  const size_t block_bytes = KvStorage(engine_kv_spec(*f.model, {}), 1).block_bytes();
  std::vector<RequestParams> returning;
  for (uint64_t round = 0; round < 2; ++round)
    for (uint64_t i = 0; i < 5; ++i) returning.push_back(test::greedy_request(f.random_tokens(60, 700 + i), 12));
  const EngineMetrics demoted = expect_split_matches_whole(
      test::default_model_path(), 2, {.max_seqs = 1, .kv = {.blocks = 12, .tiers = {.host_bytes = 64 * block_bytes}}},
      returning);
  EXPECT_GT(demoted.kv_demoted_blocks_total, 0u);
  EXPECT_GE(demoted.prefix_cache_tier_hits_tokens_total, 5u * 48) << "every returning prompt's blocks from the tier";

  std::vector<RequestParams> crowded;
  for (uint64_t i = 0; i < 6; ++i) crowded.push_back(test::greedy_request(f.random_tokens(70, 500 + i), 50, false));
  const EngineMetrics swapped =
      expect_split_matches_whole(test::default_model_path(), 2,
                                 {.max_batch_tokens = 64,
                                  .max_seqs = 6,
                                  .kv = {.blocks = 20, .tiers = {.host_bytes = 200 * block_bytes}},
                                  .kv_preempt = KvPreemptMode::kSwap},
                                 crowded);
  EXPECT_GT(swapped.preemptions_swapped_total, 0u);
  EXPECT_EQ(swapped.preempted_tokens_recomputed_total, 0u);
}

}  // namespace
}  // namespace kvs
