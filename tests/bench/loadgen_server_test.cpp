// The load generator against a real `kvserve serve` on the default model: every request of every
// level and round completes, token counts add up, and the timings are consistent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "bench/loadgen.h"
#include "bench/loadgen_chat.h"
#include "server/server_process.h"

namespace kvs::test {
namespace {

// A loadgen config aimed at `server`, with a time limit no test reaches.
bench::LoadgenConfig config_for(const ServerProcess& server) {
  bench::LoadgenConfig config;
  config.url = {.host = "127.0.0.1", .port = server.port()};
  config.duration_limit_s = 120;
  return config;
}

TEST(LoadgenServer, RoundsMergeEveryLevelsRequests) {
  TempDir dir("loadgen_server");
  ServerProcess server(dir, {});
  ASSERT_TRUE(server.started());
  bench::LoadgenConfig config = config_for(server);
  config.concurrency = {1, 4};
  config.requests = 8;
  config.rounds = 2;
  config.max_tokens = 12;
  std::vector<bench::LevelResult> passes;
  std::vector<size_t> rounds_started;
  const auto levels = bench::run_loadgen(
      config, [&](const bench::LevelResult& r) { passes.push_back(r); },
      [&](size_t round) {
        EXPECT_EQ(passes.size(), 2 * round) << "round " << round << " must start after the previous one's levels";
        rounds_started.push_back(round);
      });
  EXPECT_EQ(rounds_started, (std::vector<size_t>{0, 1}));

  ASSERT_EQ(passes.size(), 4u);  // two rounds of two levels, interleaved
  EXPECT_EQ(passes[0].concurrency, 1u);
  EXPECT_EQ(passes[1].concurrency, 4u);
  EXPECT_EQ(passes[2].concurrency, 1u);
  ASSERT_EQ(levels.size(), 2u);
  for (size_t i = 0; i < levels.size(); ++i) {
    const bench::LevelResult& r = levels[i];
    EXPECT_EQ(r.rounds, 2u);
    EXPECT_EQ(r.requests_sent, 8u) << "concurrency " << r.concurrency;
    EXPECT_EQ(r.requests_ok, 8u) << r.first_error;
    EXPECT_EQ(r.completion_tokens, 8u * 12u);  // ignore_eos: every request generates max_tokens
    EXPECT_NEAR(r.wall_seconds, passes[i].wall_seconds + passes[i + 2].wall_seconds, 1e-9);
    EXPECT_NEAR(r.tokens_per_second, static_cast<double>(r.completion_tokens) / r.wall_seconds, 1e-6);
    EXPECT_GT(r.ttft_p50_s, 0.0);
    EXPECT_LE(r.ttft_p50_s, r.ttft_p99_s);
    EXPECT_GT(r.itl_p50_s, 0.0);
    EXPECT_LE(r.itl_p50_s, r.itl_p99_s);
  }
  EXPECT_EQ(server.terminate(), 0);
}

// The RAG-like workload: one shared document, a question of its own per request. Served one at a time,
// every request after the first takes the whole document from the prefix cache (whole blocks shared,
// the rest copied from a partial match), and no two questions are alike.
TEST(LoadgenServer, SharedPrefixRequestsHitThePrefixCache) {
  TempDir dir("loadgen_rag");
  ServerProcess server(dir, {});
  ASSERT_TRUE(server.started());
  bench::LoadgenConfig config = config_for(server);
  config.concurrency = {1};
  config.requests = 5;
  config.max_tokens = 4;
  config.shared_prefix_tokens = 100;
  config.question_tokens = 6;
  const auto levels = bench::run_loadgen(config);
  ASSERT_EQ(levels.size(), 1u);
  const bench::LevelResult& r = levels[0];
  EXPECT_EQ(r.requests_ok, 5u) << r.first_error;
  EXPECT_EQ(r.prompt_tokens, 5u * 106);
  // The first request misses; each later one shares the document and at least the question's first
  // token misses (questions differ from their first token on, but may agree by chance).
  EXPECT_GE(r.cached_tokens, 4u * 100);
  EXPECT_LT(r.cached_tokens, 4u * 105);
  EXPECT_EQ(server.terminate(), 0);
}

// The multi-turn chat workload: every turn of every conversation completes, each turn's prompt is longer
// than the last, and from the second turn on most of it (the conversation so far) comes from the cache.
// --n 3 with --question-tokens 0: every request is the same prompt sampled three times; throughput
// counts the tokens of every sample (the usage the server reports), and the prompt is counted once.
TEST(LoadgenServer, ParallelSamplesCountEverySamplesTokens) {
  TempDir dir("loadgen_n");
  ServerProcess server(dir, {});
  ASSERT_TRUE(server.started());
  bench::LoadgenConfig config = config_for(server);
  config.concurrency = {2};
  config.requests = 2;
  config.max_tokens = 5;
  config.shared_prefix_tokens = 40;
  config.question_tokens = 0;
  config.n = 3;
  const auto levels = bench::run_loadgen(config);
  ASSERT_EQ(levels.size(), 1u);
  const bench::LevelResult& r = levels[0];
  EXPECT_EQ(r.requests_ok, 2u) << r.first_error;
  EXPECT_EQ(r.completion_tokens, 2u * 3 * 5);
  EXPECT_EQ(r.prompt_tokens, 2u * 40);
  EXPECT_EQ(server.terminate(), 0);
}

TEST(LoadgenServer, ChatTurnsReuseTheConversationSoFar) {
  TempDir dir("loadgen_chat");
  ServerProcess server(dir, {});
  ASSERT_TRUE(server.started());
  const bench::ChatConfig config{.url = {.host = "127.0.0.1", .port = server.port()},
                                 .clients = 2,
                                 .conversations = 3,
                                 .turns = 3,
                                 .max_tokens = 6,
                                 .duration_limit_s = 120};
  const auto turns = bench::run_chat(config);
  ASSERT_EQ(turns.size(), 3u);
  for (const bench::TurnResult& t : turns) {
    EXPECT_EQ(t.requests_ok, 3u) << "turn " << t.turn << ": " << t.first_error;
    EXPECT_GT(t.ttft_p50_s, 0.0);
  }
  EXPECT_LT(turns[0].prompt_tokens, turns[1].prompt_tokens);
  EXPECT_LT(turns[1].prompt_tokens, turns[2].prompt_tokens);
  // The earlier turns' prompts (all but what re-tokenizing the reply at its edges changes) are cached.
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_GT(turns[i].cached_tokens * 10, turns[i - 1].prompt_tokens * 8) << "turn " << turns[i].turn;
  }
  EXPECT_NE(bench::format_chat_table(turns).find("cached"), std::string::npos);
  EXPECT_EQ(turns[0].completion_tokens, 3u * 6);
  // Interleaved: the same conversations turn-major; greedy replies, so the same prompts and the same
  // numbers of tokens.
  bench::ChatConfig interleaved = config;
  interleaved.interleave = true;
  const auto again = bench::run_chat(interleaved);
  ASSERT_EQ(again.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(again[i].requests_ok, 3u) << again[i].first_error;
    EXPECT_EQ(again[i].prompt_tokens, turns[i].prompt_tokens) << "turn " << i + 1;
  }
  EXPECT_EQ(bench::to_json(interleaved, again, 1.5)["wall_seconds"].get<double>(), 1.5);
  EXPECT_EQ(server.terminate(), 0);
}

// The command line: a bandwidth probe before each round, in the table's footer and the JSON.
TEST(LoadgenServer, CommandRecordsTheMemoryBandwidthOfEachRound) {
  TempDir dir("loadgen_cli");
  ServerProcess server(dir, {});
  ASSERT_TRUE(server.started());
  const std::string json_path = dir.file("out.json");
  const std::string cmd = std::string(KVS_BINARY) + " loadgen --url http://127.0.0.1:" + std::to_string(server.port()) +
                          " --concurrency 1,2 --requests 4 --rounds 2 --max-tokens 4 --json " + json_path + " > " +
                          dir.file("stdout.txt") + " 2> " + dir.file("stderr.txt");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(dir.file("stderr.txt"));
  const auto json = nlohmann::json::parse(read_file(json_path));
  ASSERT_EQ(json["bandwidth_probe_gbs"].size(), 2u) << json.dump();
  for (const auto& gbs : json["bandwidth_probe_gbs"]) {
    EXPECT_GT(gbs.get<double>(), 0.5);  // any machine streams more than 0.5 GB/s
    EXPECT_LT(gbs.get<double>(), 5000.0);
  }
  EXPECT_NE(read_file(dir.file("stdout.txt")).find("memory bandwidth probe: "), std::string::npos);
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace kvs::test
