// Concurrency against the real server: 32 clients x 8 requests, and a KV pool too small for all
// requests at once (preemption and resumption). Greedy outputs must equal those of each request
// served alone, and every KV block must be back in the pool afterwards.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <mutex>

#include "server_process.h"

namespace kvs::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kPrompts = {"Once upon a time",       "Lily and Ben", "The cat sat", "One day",
                                           "Tom had a big red ball", "In the park",  "The sun was", "A little bird"};

std::string request_body(const std::string& prompt, int max_tokens, bool stream, bool ignore_eos) {
  return json{{"prompt", prompt},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"stream", stream},
              {"ignore_eos", ignore_eos}}
      .dump();
}

// The completion text of a response, streamed or not; nullopt when the request failed.
std::optional<std::string> complete(httplib::Client& client, const std::string& body, bool stream) {
  auto r = post_json(client, "/v1/completions", body);
  if (r.status != 200) return std::nullopt;
  if (!stream) return completion_text(r);
  const auto events = sse_events(r.body);
  if (events.empty() || events.back() != "[DONE]") return std::nullopt;
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i], nullptr, false);
    if (!chunk.is_object() || chunk.contains("error")) return std::nullopt;
    if (!chunk["choices"].empty()) text += chunk["choices"][0]["text"].get<std::string>();
  }
  return text;
}

// Each prompt served alone, one after the other.
std::vector<std::string> single_outputs(const ServerProcess& server, int max_tokens, bool ignore_eos) {
  auto client = server.client();
  std::vector<std::string> out;
  for (const std::string& prompt : kPrompts) {
    auto text = complete(client, request_body(prompt, max_tokens, false, ignore_eos), false);
    EXPECT_TRUE(text.has_value()) << prompt;
    out.push_back(text.value_or(""));
  }
  return out;
}

struct LoadOutcome {
  size_t completed = 0;
  size_t failed = 0;
  std::vector<std::string> mismatches;
};

// `clients` threads each send `per_client` requests (alternating streamed and whole responses)
// and compare every output with the single-request one.
LoadOutcome run_load(const ServerProcess& server, size_t clients, size_t per_client, int max_tokens, bool ignore_eos,
                     const std::vector<std::string>& expected, Clock::duration limit) {
  LoadOutcome outcome;
  std::mutex mutex;
  const auto deadline = Clock::now() + limit;
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = server.client(/*read_timeout_s=*/180);
      for (size_t i = 0; i < per_client && Clock::now() < deadline; ++i) {
        const size_t p = (c + i) % kPrompts.size();
        const bool stream = (c + i) % 2 == 0;
        auto text = complete(client, request_body(kPrompts[p], max_tokens, stream, ignore_eos), stream);
        std::lock_guard lock(mutex);
        if (!text) {
          ++outcome.failed;
        } else {
          ++outcome.completed;
          if (*text != expected[p]) {
            outcome.mismatches.push_back(fmt::format("client {} request {} ({}, prompt '{}'): got '{}', alone '{}'", c,
                                                     i, stream ? "stream" : "whole", kPrompts[p], *text, expected[p]));
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return outcome;
}

std::string metrics_text(const ServerProcess& server) {
  auto client = server.client();
  return get(client, "/metrics").body;
}

TEST(ServerLoad, ThirtyTwoClientsTimesEightRequests) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_load");
  ServerProcess server(dir, {"--max-seqs", "32"});
  ASSERT_TRUE(server.started());
  const int max_tokens = 48;
  const auto expected = single_outputs(server, max_tokens, /*ignore_eos=*/false);
  const auto started = Clock::now();
  const LoadOutcome outcome = run_load(server, 32, 8, max_tokens, false, expected, std::chrono::seconds(300));
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  EXPECT_EQ(outcome.completed, 32u * 8u) << "failed: " << outcome.failed << " in " << seconds << " s";
  EXPECT_EQ(outcome.failed, 0u);
  EXPECT_TRUE(outcome.mismatches.empty())
      << outcome.mismatches.size() << " mismatches, first: " << outcome.mismatches.front();
  const std::string metrics = metrics_text(server);
  EXPECT_EQ(metric_value(metrics, "kvserve_kv_blocks_used"), 0) << metrics;
  EXPECT_EQ(metric_value(metrics, "kvserve_requests_running"), 0);
  EXPECT_EQ(metric_value(metrics, "kvserve_requests_waiting"), 0);
  EXPECT_GE(metric_value(metrics, "kvserve_requests_finished_total"), 32.0 * 8 + kPrompts.size());
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

TEST(ServerLoad, PreemptionAndResumptionKeepOutputsExact) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_preempt");
  // 12 blocks of 16 tokens: one request of 5 + 120 tokens needs 8 blocks, so 8 at once cannot
  // all keep their K/V and the scheduler must preempt and later recompute.
  ServerProcess server(dir, {"--kv-blocks", "12", "--block-size", "16", "--max-seqs", "8"});
  ASSERT_TRUE(server.started());
  const int max_tokens = 120;
  const auto expected = single_outputs(server, max_tokens, /*ignore_eos=*/true);
  const LoadOutcome outcome = run_load(server, 8, 2, max_tokens, true, expected, std::chrono::seconds(300));
  EXPECT_EQ(outcome.completed, 16u);
  EXPECT_EQ(outcome.failed, 0u);
  EXPECT_TRUE(outcome.mismatches.empty())
      << outcome.mismatches.size() << " mismatches, first: " << outcome.mismatches.front();
  const std::string metrics = metrics_text(server);
  EXPECT_GT(metric_value(metrics, "kvserve_preemptions_total"), 0) << metrics;
  EXPECT_EQ(metric_value(metrics, "kvserve_kv_blocks_used"), 0) << metrics;
  EXPECT_EQ(metric_value(metrics, "kvserve_kv_blocks_total"), 12);
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

// A prompt larger than the whole pool gets the engine's clear error over HTTP, and the server keeps serving.
TEST(ServerLoad, PromptLargerThanThePoolIsAClearError) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_tiny_pool");
  ServerProcess server(dir, {"--kv-blocks", "1", "--block-size", "1"});
  ASSERT_TRUE(server.started());
  auto client = server.client();
  const HttpResult r =
      post_json(client, "/v1/completions",
                R"({"model": "stories260K", "prompt": "Once upon a time, there was a little girl", "max_tokens": 8})");
  EXPECT_GE(r.status, 400) << r.body;
  EXPECT_LT(r.status, 600) << r.body;
  EXPECT_NE(r.body.find("the whole pool has 1"), std::string::npos) << r.body;
  EXPECT_EQ(get(client, "/health").status, 200);
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

}  // namespace
}  // namespace kvs::test
