// A host tier under tensor parallelism over real processes: `mpirun -np 2 kvserve serve --tp 2 --kv-host ...` answers
// what `kvserve serve --kv-host ...` answers, prompt for prompt, while its pool of 12 blocks evicts the prompts'
// blocks into the tier and the prompts that come back load them from it (rank 0 decides; each rank moves its own
// heads' share of every block between its pool and the same host tier slots).
#include <gtest/gtest.h>

#include "server_process.h"

namespace kvs::test {
namespace {

// Five prompts of about 60 tokens, then the same five again: greedy completions of each, in order, and the metrics.
struct Answers {
  std::vector<std::string> texts;
  std::string metrics;
};

Answers ask_returning_prompts(ServerProcess& server) {
  Answers a;
  auto client = server.client();
  const std::vector<std::string> openings = {"Once upon a time", "One day, a little girl named Lily",
                                             "Tom had a red ball", "The sun was shining and the birds",
                                             "In a small house near the woods"};
  for (size_t round = 0; round < 2; ++round) {
    for (const std::string& opening : openings) {
      const std::string prompt = opening +
                                 ", there was a big dog who liked to play in the park with his friends every "
                                 "day after school, and they ran and laughed until the sun went down.";
      const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};
      const HttpResult r = post_json(client, "/v1/completions", body.dump());
      EXPECT_EQ(r.status, 200) << r.body;
      a.texts.push_back(completion_text(r));
    }
  }
  a.metrics = get(client, "/metrics").body;
  return a;
}

TEST(ServerTensorParallel, HostTierUnderMpirunAnswersWhatOneRankAnswers) {
  if (std::string(KVS_MPIRUN).empty()) GTEST_SKIP() << "this build has no MPI (the sanitizer build leaves it out)";
  const std::vector<std::string> args = {"--kv-blocks", "12",   "--max-seqs", "1",
                                         "--kv-host",   "2MiB", "--kv-dtype", "f32"};
  TempDir one_dir("tp-tiers-one"), split_dir("tp-tiers-split");
  Answers one, split;
  {
    ServerProcess server(one_dir, args);
    ASSERT_TRUE(server.started()) << server.stderr_text();
    one = ask_returning_prompts(server);
  }
  {
    std::vector<std::string> tp = args;
    tp.insert(tp.end(), {"--tp", "2"});
    ServerProcess server(split_dir, tp, {KVS_MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2"});
    ASSERT_TRUE(server.started()) << server.stderr_text();
    split = ask_returning_prompts(server);
  }
  EXPECT_EQ(split.texts, one.texts);
  std::printf("tier hits (tokens): %g with one rank, %g with two\n",
              metric_value(one.metrics, "kvserve_prefix_cache_tier_hits_tokens_total"),
              metric_value(split.metrics, "kvserve_prefix_cache_tier_hits_tokens_total"));
  for (const Answers* a : {&one, &split}) {
    EXPECT_GT(metric_value(a->metrics, "kvserve_kv_demoted_blocks_total"), 0) << a->metrics;
    EXPECT_GE(metric_value(a->metrics, "kvserve_prefix_cache_tier_hits_tokens_total"), 5 * 48) << a->metrics;
  }
}

}  // namespace
}  // namespace kvs::test
