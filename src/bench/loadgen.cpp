#include "bench/loadgen.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "bench/loadgen_client.h"

namespace kvs::bench {
namespace {

using Clock = std::chrono::steady_clock;

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8 in dotted quad form.
  int parts = 0;
  size_t pos = 0;
  int first = -1;
  while (pos <= host.size()) {
    const size_t dot = std::min(host.find('.', pos), host.size());
    int value = -1;
    const auto [end, ec] = std::from_chars(host.data() + pos, host.data() + dot, value);
    if (ec != std::errc() || end != host.data() + dot || dot == pos || value < 0 || value > 255) return false;
    if (parts == 0) first = value;
    ++parts;
    pos = dot + 1;
  }
  return parts == 4 && first == 127;
}

// Everything the clients of one level share.
struct LevelRun {
  std::atomic<size_t> next_request{0};
  std::mutex mutex;
  std::vector<StreamTiming> timings;
};

LevelResult summarize(size_t concurrency, std::vector<StreamTiming>& timings, double wall_seconds) {
  LevelResult r;
  r.concurrency = concurrency;
  r.requests_sent = timings.size();
  r.wall_seconds = wall_seconds;
  std::vector<double> ttft, itl;
  for (StreamTiming& t : timings) {
    if (t.ok) ++r.requests_ok;
    if (t.cut) ++r.requests_cut;
    if (!t.ok && !t.cut) {
      ++r.requests_failed;
      if (r.first_error.empty()) r.first_error = t.error;
    }
    if (t.ttft_s >= 0) ttft.push_back(t.ttft_s);
    itl.insert(itl.end(), t.gaps_s.begin(), t.gaps_s.end());
    r.completion_tokens += t.completion_tokens;
    r.prompt_tokens += t.prompt_tokens;
    r.cached_tokens += t.cached_tokens;
  }
  r.tokens_per_second = wall_seconds > 0 ? static_cast<double>(r.completion_tokens) / wall_seconds : 0.0;
  r.ttft_p50_s = percentile(ttft, 0.50);
  r.ttft_p99_s = percentile(ttft, 0.99);
  r.itl_p50_s = percentile(itl, 0.50);
  r.itl_p99_s = percentile(itl, 0.99);
  return r;
}

// One pass of a level: `total` requests from `concurrency` clients; the timings and the wall time.
struct LevelPass {
  std::vector<StreamTiming> timings;
  double wall_seconds = 0.0;
};

// `n` token ids drawn from `seed`. Ids 3..258 are byte tokens in every vocabulary kvserve reads.
std::vector<TokenId> pseudo_random_tokens(size_t n, uint64_t seed) {
  std::vector<TokenId> out(n);
  for (TokenId& id : out) id = static_cast<TokenId>(3 + next_pseudo_random(seed) % 256);
  return out;
}

// The body of request `index` (numbered across the whole run): the fixed prompt, or the shared
// document followed by a question of its own.
std::string request_body(const LoadgenConfig& config, const nlohmann::json& base, const std::vector<TokenId>& document,
                         size_t index) {
  if (config.shared_prefix_tokens == 0) return base.dump();
  std::vector<TokenId> prompt = document;
  const std::vector<TokenId> question =
      pseudo_random_tokens(config.question_tokens, (index + 1) * 0xD1B54A32D192ED03ull);
  prompt.insert(prompt.end(), question.begin(), question.end());
  nlohmann::json body = base;
  body["prompt"] = prompt;
  return body.dump();
}

LevelPass run_level(const LoadgenConfig& config, size_t concurrency, size_t total, const nlohmann::json& base,
                    const std::vector<TokenId>& document, size_t first_index) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config.duration_limit_s));
  LevelRun run;
  std::vector<std::thread> clients;
  for (size_t c = 0; c < concurrency; ++c) {
    clients.emplace_back([&] {
      for (size_t i = run.next_request.fetch_add(1); i < total && Clock::now() < deadline;
           i = run.next_request.fetch_add(1)) {
        StreamTiming timing = stream_completion(config.url, request_body(config, base, document, first_index + i),
                                                config.api_key, deadline);
        std::lock_guard lock(run.mutex);
        run.timings.push_back(std::move(timing));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  return {std::move(run.timings), std::chrono::duration<double>(Clock::now() - start).count()};
}

}  // namespace

Expected<LoopbackUrl> parse_loopback_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) {
    return Status::invalid_argument(fmt::format("--url must start with http:// (got '{}')", url));
  }
  std::string_view rest = url.substr(kScheme.size());
  rest = rest.substr(0, rest.find('/'));  // drop a path such as /v1
  LoopbackUrl out;
  std::string_view host = rest, port;
  if (!rest.empty() && rest.front() == '[') {  // [::1]:8080
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return Status::invalid_argument(fmt::format("bad IPv6 host in '{}'", url));
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (!is_loopback_host(host)) {
    return Status::invalid_argument(fmt::format(
        "refusing to load '{}': the load generator only targets this machine (127.0.0.0/8, localhost, ::1)", host));
  }
  out.host = std::string(host);
  if (!port.empty()) {
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
    if (ec != std::errc() || end != port.data() + port.size() || out.port < 1 || out.port > 65535) {
      return Status::invalid_argument(fmt::format("bad port '{}' in '{}'", port, url));
    }
  }
  return out;
}

Status LoadgenConfig::validate() const {
  if (concurrency.empty()) return Status::invalid_argument("give at least one concurrency level");
  for (size_t c : concurrency) {
    if (c == 0 || c > 1024) return Status::invalid_argument(fmt::format("concurrency must be 1..1024, got {}", c));
  }
  if (requests == 0) return Status::invalid_argument("--requests must be at least 1, got 0");
  if (rounds == 0 || rounds > requests) {
    return Status::invalid_argument(fmt::format("--rounds must be 1..--requests ({}), got {}", requests, rounds));
  }
  if (max_tokens == 0) return Status::invalid_argument("--max-tokens must be at least 1, got 0");
  if (n == 0 || n > 64) return Status::invalid_argument(fmt::format("--n must be 1..64, got {}", n));
  if (!(duration_limit_s > 0)) {
    return Status::invalid_argument(fmt::format("--duration-limit must be positive, got {}", duration_limit_s));
  }
  return Status::ok();
}

double percentile(std::vector<double>& values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

std::vector<LevelResult> run_loadgen(const LoadgenConfig& config,
                                     const std::function<void(const LevelResult&)>& on_level,
                                     const std::function<void(size_t round)>& before_round) {
  nlohmann::json body = {{"prompt", config.prompt},
                         {"max_tokens", config.max_tokens},
                         {"temperature", config.temperature},
                         {"ignore_eos", config.ignore_eos},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (!config.model.empty()) body["model"] = config.model;
  if (config.n > 1) body["n"] = config.n;
  const std::vector<TokenId> document = pseudo_random_tokens(config.shared_prefix_tokens, 0x9E3779B97F4A7C15ull);
  size_t sent = 0;  // requests of earlier passes: every request of the run gets its own index
  // Rounds interleave the levels (1 2 4 .. 32, then again), so a drift of the host's speed over the
  // run reaches every level alike instead of skewing the ratios between them.
  const size_t rounds = std::max<size_t>(1, config.rounds);
  std::vector<LevelPass> merged(config.concurrency.size());
  for (size_t round = 0; round < rounds; ++round) {
    if (before_round) before_round(round);
    for (size_t i = 0; i < config.concurrency.size(); ++i) {
      const size_t concurrency = config.concurrency[i];
      const size_t share = config.requests / rounds + (round < config.requests % rounds ? 1 : 0);
      const size_t total = std::max(share, concurrency);
      LevelPass pass = run_level(config, concurrency, total, body, document, sent);
      sent += total;
      if (on_level) {
        LevelResult r = summarize(concurrency, pass.timings, pass.wall_seconds);
        r.rounds = 1;
        on_level(r);
      }
      merged[i].wall_seconds += pass.wall_seconds;
      for (StreamTiming& t : pass.timings) merged[i].timings.push_back(std::move(t));
    }
  }
  std::vector<LevelResult> levels;
  for (size_t i = 0; i < merged.size(); ++i) {
    levels.push_back(summarize(config.concurrency[i], merged[i].timings, merged[i].wall_seconds));
    levels.back().rounds = rounds;
  }
  return levels;
}

std::string format_table(const std::vector<LevelResult>& levels) {
  std::string out = fmt::format("{:>11} {:>8} {:>5} {:>7} {:>8} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
                                "concurrency", "requests", "ok", "tokens", "wall_s", "tok/s", "speedup", "ttft_p50",
                                "ttft_p99", "itl_p50", "itl_p99", "cached");
  const double base = levels.empty() ? 0.0 : levels.front().tokens_per_second;
  for (const LevelResult& r : levels) {
    out += fmt::format(
        "{:>11} {:>8} {:>5} {:>7} {:>8.2f} {:>10.1f} {:>7.2f}x {:>8.1f}ms {:>8.1f}ms {:>8.2f}ms {:>8.2f}ms {:>6.1f}%\n",
        r.concurrency, r.requests_sent, r.requests_ok, r.completion_tokens, r.wall_seconds, r.tokens_per_second,
        base > 0 ? r.tokens_per_second / base : 0.0, r.ttft_p50_s * 1e3, r.ttft_p99_s * 1e3, r.itl_p50_s * 1e3,
        r.itl_p99_s * 1e3, r.prompt_tokens ? 100.0 * static_cast<double>(r.cached_tokens) / r.prompt_tokens : 0.0);
  }
  return out;
}

nlohmann::json to_json(const LoadgenConfig& config, const std::vector<LevelResult>& levels) {
  nlohmann::json out = {{"url", fmt::format("http://{}:{}", config.url.host, config.url.port)},
                        {"prompt", config.shared_prefix_tokens ? "" : config.prompt},
                        {"shared_prefix_tokens", config.shared_prefix_tokens},
                        {"question_tokens", config.shared_prefix_tokens ? config.question_tokens : 0},
                        {"max_tokens", config.max_tokens},
                        {"n", config.n},
                        {"requests_per_level", config.requests},
                        {"rounds", config.rounds},
                        {"duration_limit_s", config.duration_limit_s},
                        {"temperature", config.temperature},
                        {"ignore_eos", config.ignore_eos},
                        {"levels", nlohmann::json::array()}};
  const double base = levels.empty() ? 0.0 : levels.front().tokens_per_second;
  for (const LevelResult& r : levels) {
    out["levels"].push_back({{"concurrency", r.concurrency},
                             {"requests_sent", r.requests_sent},
                             {"requests_ok", r.requests_ok},
                             {"requests_failed", r.requests_failed},
                             {"requests_cut", r.requests_cut},
                             {"completion_tokens", r.completion_tokens},
                             {"prompt_tokens", r.prompt_tokens},
                             {"cached_tokens", r.cached_tokens},
                             {"wall_seconds", r.wall_seconds},
                             {"tokens_per_second", r.tokens_per_second},
                             {"speedup_vs_first_level", base > 0 ? r.tokens_per_second / base : 0.0},
                             {"ttft_p50_s", r.ttft_p50_s},
                             {"ttft_p99_s", r.ttft_p99_s},
                             {"itl_p50_s", r.itl_p50_s},
                             {"itl_p99_s", r.itl_p99_s},
                             {"first_error", r.first_error}});
  }
  return out;
}

}  // namespace kvs::bench
