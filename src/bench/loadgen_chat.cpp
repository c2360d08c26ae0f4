#include "bench/loadgen_chat.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "bench/loadgen_client.h"

namespace kvs::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A user message of `words` words, the same for the same conversation and turn on every run.
std::string user_message(size_t conversation, size_t turn, size_t words) {
  static constexpr const char* kWords[] = {"the", "little", "dog",  "ran",  "to",  "a",     "big", "tree",
                                           "and", "saw",    "bird", "who",  "was", "happy", "sad", "girl",
                                           "boy", "played", "with", "ball", "in",  "park",  "sun", "day"};
  constexpr size_t kCount = sizeof(kWords) / sizeof(kWords[0]);
  uint64_t state = (conversation + 1) * 0x9E3779B97F4A7C15ull ^ (turn + 1) * 0xD1B54A32D192ED03ull;
  std::string out;
  for (size_t w = 0; w < words; ++w) {
    if (w > 0) out += ' ';
    out += kWords[next_pseudo_random(state) % kCount];
  }
  return out;
}

}  // namespace

Status ChatConfig::validate() const {
  if (clients == 0 || clients > 1024)
    return Status::invalid_argument(fmt::format("clients must be 1..1024, got {}", clients));
  if (conversations == 0) return Status::invalid_argument("--conversations must be at least 1, got 0");
  if (turns == 0) return Status::invalid_argument("--chat-turns must be at least 1, got 0");
  if (max_tokens == 0) return Status::invalid_argument("--max-tokens must be at least 1, got 0");
  return Status::ok();
}

namespace {

// Per turn (in order): the requests that came back and failed, tokens, and the TTFT percentiles.
std::vector<TurnResult> summarize_turns(const std::vector<std::vector<StreamTiming>>& by_turn) {
  std::vector<TurnResult> out;
  for (size_t turn = 0; turn < by_turn.size(); ++turn) {
    TurnResult r{.turn = turn + 1};
    std::vector<double> ttft;
    for (const StreamTiming& t : by_turn[turn]) {
      if (!t.ok) {
        ++r.requests_failed;
        if (r.first_error.empty()) r.first_error = t.cut ? "cut by the time limit" : t.error;
        continue;
      }
      ++r.requests_ok;
      r.prompt_tokens += t.prompt_tokens;
      r.cached_tokens += t.cached_tokens;
      r.completion_tokens += t.completion_tokens;
      if (t.ttft_s >= 0) ttft.push_back(t.ttft_s);
    }
    r.ttft_p50_s = percentile(ttft, 0.50);
    r.ttft_p99_s = percentile(ttft, 0.99);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::vector<TurnResult> run_chat(const ChatConfig& config) {
  nlohmann::json base = {{"max_tokens", config.max_tokens},
                         {"temperature", 0.0},
                         {"ignore_eos", true},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (!config.model.empty()) base["model"] = config.model;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(config.duration_limit_s));
  std::vector<std::vector<StreamTiming>> by_turn(config.turns);
  std::mutex mutex;
  // Work items (conversation, turn): a conversation's turns in order; interleaved, turn-major.
  std::vector<std::pair<size_t, size_t>> items;
  if (config.interleave) {
    for (size_t turn = 0; turn < config.turns; ++turn)
      for (size_t conv = 0; conv < config.conversations; ++conv) items.emplace_back(conv, turn);
  }
  std::atomic<size_t> next_item{0}, next_conversation{0};
  std::vector<std::string> history(config.conversations);
  std::vector<size_t> turns_done(config.conversations, 0);
  std::vector<bool> broken(config.conversations, false);  // a failed reply ends its conversation
  std::condition_variable turn_done;
  // One turn of `conv`: its history so far plus a new message; returns whether the reply came.
  const auto run_turn = [&](size_t conv, size_t turn) {
    std::string prompt;
    {
      std::unique_lock lock(mutex);
      turn_done.wait(lock, [&] { return turns_done[conv] == turn || broken[conv]; });
      if (Clock::now() >= deadline) broken[conv] = true;  // no new turn after the time limit
      if (broken[conv]) {
        turn_done.notify_all();
        return false;
      }
      history[conv] += "User: " + user_message(conv, turn, config.message_words) + "\nAssistant:";
      prompt = history[conv];
    }
    nlohmann::json body = base;
    body["prompt"] = prompt;
    StreamTiming timing = stream_completion(config.url, body.dump(), config.api_key, deadline);
    const bool ok = timing.ok;
    {
      std::lock_guard lock(mutex);
      history[conv] += timing.text + "\n";
      turns_done[conv] = turn + 1;
      broken[conv] = broken[conv] || !ok;
      by_turn[turn].push_back(std::move(timing));
    }
    turn_done.notify_all();
    return ok;
  };
  std::vector<std::thread> clients;
  for (size_t c = 0; c < config.clients; ++c) {
    clients.emplace_back([&] {
      if (config.interleave) {
        // Every item taken runs (or gives up at the time limit): a later turn of its conversation waits for it.
        for (size_t i = next_item.fetch_add(1); i < items.size(); i = next_item.fetch_add(1))
          run_turn(items[i].first, items[i].second);
        return;
      }
      for (size_t conv = next_conversation.fetch_add(1); conv < config.conversations && Clock::now() < deadline;
           conv = next_conversation.fetch_add(1)) {
        for (size_t turn = 0; turn < config.turns && Clock::now() < deadline; ++turn) {
          if (!run_turn(conv, turn)) break;  // the conversation cannot go on without its reply
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  return summarize_turns(by_turn);
}

std::string format_chat_table(const std::vector<TurnResult>& turns) {
  std::string out = fmt::format("{:>5} {:>5} {:>7} {:>14} {:>7} {:>10} {:>10}\n", "turn", "ok", "failed",
                                "prompt_tokens", "cached", "ttft_p50", "ttft_p99");
  for (const TurnResult& r : turns) {
    const double cached =
        r.prompt_tokens ? 100.0 * static_cast<double>(r.cached_tokens) / static_cast<double>(r.prompt_tokens) : 0.0;
    out += fmt::format("{:>5} {:>5} {:>7} {:>14} {:>6.1f}% {:>8.1f}ms {:>8.1f}ms\n", r.turn, r.requests_ok,
                       r.requests_failed, r.prompt_tokens, cached, r.ttft_p50_s * 1e3, r.ttft_p99_s * 1e3);
  }
  return out;
}

nlohmann::json to_json(const ChatConfig& config, const std::vector<TurnResult>& turns, double wall_seconds) {
  nlohmann::json out = {{"url", fmt::format("http://{}:{}", config.url.host, config.url.port)},
                        {"workload", "chat"},
                        {"clients", config.clients},
                        {"conversations", config.conversations},
                        {"turns", config.turns},
                        {"max_tokens", config.max_tokens},
                        {"message_words", config.message_words},
                        {"interleave", config.interleave},
                        {"wall_seconds", wall_seconds},
                        {"per_turn", nlohmann::json::array()}};
  for (const TurnResult& r : turns) {
    out["per_turn"].push_back({{"turn", r.turn},
                               {"requests_ok", r.requests_ok},
                               {"requests_failed", r.requests_failed},
                               {"prompt_tokens", r.prompt_tokens},
                               {"cached_tokens", r.cached_tokens},
                               {"completion_tokens", r.completion_tokens},
                               {"ttft_p50_s", r.ttft_p50_s},
                               {"ttft_p99_s", r.ttft_p99_s}});
  }
  return out;
}

}  // namespace kvs::bench
