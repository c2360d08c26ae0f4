// The load generator against a real `kvserve serve` on the default model: every request of every
// level and round completes, token counts add up, and the timings are consistent.
#include <gtest/gtest.h>

#include "server/loadgen.h"
#include "server_process.h"

namespace kvs::test {
namespace {

TEST(LoadgenServer, RoundsMergeEveryLevelsRequests) {
  TempDir dir("loadgen_server");
  ServerProcess server(dir, {});
  ASSERT_TRUE(server.started());
  server::LoadgenConfig config;
  config.url = {.host = "127.0.0.1", .port = server.port()};
  config.concurrency = {1, 4};
  config.requests = 8;
  config.rounds = 2;
  config.max_tokens = 12;
  config.duration_limit_s = 120;
  std::vector<server::LevelResult> passes;
  const auto levels = server::run_loadgen(config, [&](const server::LevelResult& r) { passes.push_back(r); });

  ASSERT_EQ(passes.size(), 4u);  // two rounds of two levels, interleaved
  EXPECT_EQ(passes[0].concurrency, 1u);
  EXPECT_EQ(passes[1].concurrency, 4u);
  EXPECT_EQ(passes[2].concurrency, 1u);
  ASSERT_EQ(levels.size(), 2u);
  for (size_t i = 0; i < levels.size(); ++i) {
    const server::LevelResult& r = levels[i];
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

}  // namespace
}  // namespace kvs::test
