// kvserve loadgen: streaming load against a kvserve on this machine at several concurrency levels;
// prints a table (throughput, TTFT and inter-token latency percentiles) and optionally writes JSON.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>

#include "bench/loadgen.h"
#include "bench/loadgen_chat.h"
#include "bench/loadgen_client.h"
#include "bench/probe.h"
#include "cli/commands.h"

namespace kvs::cli {
namespace {

struct LoadgenOptions {
  std::string url = "http://127.0.0.1:8080";
  std::vector<size_t> concurrency = {1, 2, 4, 8, 16, 32};
  bench::LoadgenConfig config;
  bool respect_eos = false;
  bool no_probe = false;
  std::string json_path;
  size_t chat_turns = 0;  // > 0: the multi-turn chat workload
  size_t conversations = 16;
  size_t message_words = 12;
  bool interleave = false;
};

// 1 GiB per probe, as `kvserve bench` uses (a 64 MiB buffer read 1.6x faster on the development VM:
// part of it stayed in the last-level cache); about 0.3 s on 2 cores.
constexpr size_t kProbeBytes = size_t{1} << 30;

void write_json(const std::string& path, const nlohmann::json& json) {
  std::ofstream out(path);
  out << json.dump(2) << "\n";
  if (!out) throw CommandError("cannot write " + path);
}

// --chat-turns: conversations of several turns, the first concurrency level's count at a time.
void loadgen_chat(const LoadgenOptions& options, const bench::LoopbackUrl& url) {
  const bench::ChatConfig config{.url = url,
                                 .clients = options.concurrency.empty() ? 1 : options.concurrency.front(),
                                 .conversations = options.conversations,
                                 .turns = options.chat_turns,
                                 .max_tokens = options.config.max_tokens,
                                 .message_words = options.message_words,
                                 .interleave = options.interleave,
                                 .duration_limit_s = options.config.duration_limit_s,
                                 .api_key = options.config.api_key,
                                 .model = options.config.model};
  if (Status s = config.validate(); !s) throw CommandError(s.message());
  if (Status s = bench::probe_server(config.url, config.api_key); !s) throw CommandError(s.message());
  std::fprintf(stderr, "kvserve loadgen: %s, %zu conversations of %zu turns, %zu at a time, %zu tokens a reply\n",
               options.url.c_str(), config.conversations, config.turns, config.clients, config.max_tokens);
  const auto start = std::chrono::steady_clock::now();
  const auto turns = bench::run_chat(config);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fputs(bench::format_chat_table(turns).c_str(), stdout);
  uint64_t prompt = 0, cached = 0, generated = 0;
  for (const bench::TurnResult& t : turns) {
    prompt += t.prompt_tokens;
    cached += t.cached_tokens;
    generated += t.completion_tokens;
  }
  std::printf("all turns: %.2f s, %llu prompt tokens (%.1f%% cached), %llu generated, %.1f generated tok/s\n", wall,
              static_cast<unsigned long long>(prompt), prompt ? 100.0 * double(cached) / double(prompt) : 0.0,
              static_cast<unsigned long long>(generated), double(generated) / std::max(wall, 1e-9));
  std::fflush(stdout);
  if (!options.json_path.empty()) write_json(options.json_path, bench::to_json(config, turns, wall));
  size_t failed = 0;
  std::string first_error;
  for (const auto& r : turns) {
    failed += r.requests_failed;
    if (first_error.empty()) first_error = r.first_error;
  }
  if (failed > 0) throw CommandError(fmt::format("{} requests failed (first: {})", failed, first_error));
}

void loadgen(const LoadgenOptions& options) {
  std::signal(SIGPIPE, SIG_IGN);  // a server that goes away must fail requests, not kill us
  bench::LoadgenConfig config = options.config;
  auto url = bench::parse_loopback_url(options.url);
  if (!url) throw CommandError(url.status().message());
  if (options.chat_turns > 0) return loadgen_chat(options, *url);
  config.url = *url;
  config.concurrency = options.concurrency;
  config.ignore_eos = !options.respect_eos;
  if (Status s = config.validate(); !s) throw CommandError(s.message());
  if (Status s = bench::probe_server(config.url, config.api_key); !s) throw CommandError(s.message());
  std::string workload = fmt::format("prompt \"{}\"", config.prompt);
  if (config.shared_prefix_tokens > 0) {
    workload = config.question_tokens == 0 ? fmt::format("one {}-token prompt for all", config.shared_prefix_tokens)
                                           : fmt::format("a shared {}-token document + a {}-token question of its own",
                                                         config.shared_prefix_tokens, config.question_tokens);
  }
  std::fprintf(stderr,
               "kvserve loadgen: %s, %zu requests per level in %zu rounds, %zu tokens each (x %zu samples), %s, "
               "limit %.0f s per level\n",
               options.url.c_str(), config.requests, config.rounds, config.max_tokens, config.n, workload.c_str(),
               config.duration_limit_s);
  // The server and this client share the machine: its memory bandwidth, which drifts on shared hosts,
  // bounds one stream's speed, so each round records it (the ratios between levels depend on it).
  std::vector<double> probes;
  std::unique_ptr<ThreadPool> probe_pool;
  if (!options.no_probe) probe_pool = std::make_unique<ThreadPool>(std::thread::hardware_concurrency());
  const auto before_round = [&](size_t round) {
    if (!probe_pool) return;
    probes.push_back(measure_memory_bandwidth_gbs(*probe_pool, kProbeBytes));
    std::fprintf(stderr, "  round %zu: memory bandwidth probe %.1f GB/s\n", round + 1, probes.back());
  };
  const auto on_level = [](const bench::LevelResult& r) {
    std::fprintf(stderr, "  concurrency %zu: %zu/%zu ok, %.1f tok/s%s%s\n", r.concurrency, r.requests_ok,
                 r.requests_sent, r.tokens_per_second,
                 r.first_error.empty() ? "" : ", first error: ", r.first_error.c_str());
  };
  const auto levels = bench::run_loadgen(config, on_level, before_round);
  std::fputs(bench::format_table(levels).c_str(), stdout);
  if (!probes.empty()) {
    const auto [low, high] = std::minmax_element(probes.begin(), probes.end());
    std::printf("memory bandwidth probe: %.1f-%.1f GB/s over %zu rounds\n", *low, *high, probes.size());
  }
  std::fflush(stdout);
  if (!options.json_path.empty()) {
    nlohmann::json json = bench::to_json(config, levels);
    json["bandwidth_probe_gbs"] = probes;
    write_json(options.json_path, json);
  }
  size_t failed = 0;
  for (const auto& r : levels) failed += r.requests_failed;
  if (failed > 0) throw CommandError(fmt::format("{} requests failed", failed));
}

}  // namespace

void register_loadgen(CLI::App& app) {
  auto options = std::make_shared<LoadgenOptions>();
  bench::LoadgenConfig& c = options->config;
  CLI::App* cmd = app.add_subcommand("loadgen", "Streaming load test against a local kvserve serve (loopback only)");
  cmd->add_option("--url", options->url, "Server URL (loopback only)")->capture_default_str();
  cmd->add_option("--concurrency", options->concurrency, "Concurrency levels, e.g. 1,2,4,8,16,32")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--requests", c.requests, "Requests per level (at least the level's concurrency)")
      ->capture_default_str();
  cmd->add_option("--rounds", c.rounds,
                  "Passes over all levels, the requests split between them (interleaves the levels against drift)")
      ->capture_default_str();
  cmd->add_option("--max-tokens", c.max_tokens, "Tokens to generate per request")->capture_default_str();
  cmd->add_option("--prompt", c.prompt, "Prompt of every request")->capture_default_str();
  cmd->add_option("--shared-prefix", c.shared_prefix_tokens,
                  "RAG-like workload: every prompt is one shared document of this many tokens, then a question of "
                  "its own (instead of --prompt)");
  cmd->add_option("--n", c.n, "Samples per request (OpenAI's n; they share the prompt's KV blocks)")
      ->capture_default_str();
  cmd->add_option("--question-tokens", c.question_tokens,
                  "Tokens of each request's question (with --shared-prefix; 0: every prompt is the document)")
      ->capture_default_str();
  cmd->add_option("--chat-turns", options->chat_turns,
                  "Multi-turn chat workload: conversations of this many turns, each prompt the whole conversation "
                  "so far plus a new message (the first --concurrency level of them at a time)");
  cmd->add_option("--conversations", options->conversations, "Conversations in all (with --chat-turns)")
      ->capture_default_str();
  cmd->add_option("--message-words", options->message_words, "Words of each user message (with --chat-turns)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 16))
      ->capture_default_str();
  cmd->add_flag("--interleave-turns", options->interleave,
                "With --chat-turns: every conversation's first turn, then every second one, ... (a conversation "
                "returns after all the others had a turn) instead of one conversation at a time per client");
  cmd->add_option("--duration-limit", c.duration_limit_s, "Seconds per level before open streams are cut")
      ->capture_default_str();
  cmd->add_option("--temperature", c.temperature, "Sampling temperature of the requests")->capture_default_str();
  cmd->add_flag("--respect-eos", options->respect_eos, "Let requests end at EOS (default: always max-tokens tokens)");
  cmd->add_option("--api-key", c.api_key, "Bearer key, when the server requires one")->envname("KVSERVE_API_KEY");
  cmd->add_option("--model", c.model, "Model field of the requests (default: left out)");
  cmd->add_option("--json", options->json_path, "Also write the results as JSON to this file");
  cmd->add_flag("--no-probe", options->no_probe,
                "Skip the memory-bandwidth probe (1 GiB, about 0.3 s) before each round");
  cmd->callback([options] { loadgen(*options); });
}

}  // namespace kvs::cli
