// The load generator behind `kvserve loadgen`: for each concurrency level, that many clients send
// streaming /v1/completions requests to a kvserve on this machine until the level's request count
// or time limit is reached, and timings are taken client-side:
//   throughput    generated tokens (from each stream's usage) / wall time of the level
//   TTFT          request sent -> first chunk with text
//   inter-token   gaps between consecutive chunks with text (the server sends one chunk per
//                 generated token, unless a token ends mid-character or inside a possible stop string;
//                 with n > 1, chunks of any choice)
// Only loopback URLs are accepted: it is a benchmark of this machine, not a tool to load others.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace kvs::bench {

struct LoopbackUrl {
  std::string host;  // 127.x.y.z, localhost or ::1
  int port = 80;
};
// "http://127.0.0.1:8080" (a trailing "/" or "/v1" is allowed). Refuses https and any host that
// is not loopback.
Expected<LoopbackUrl> parse_loopback_url(std::string_view url);

struct LoadgenConfig {
  LoopbackUrl url;
  std::vector<size_t> concurrency = {1, 2, 4, 8, 16, 32};
  size_t requests = 64;  // per level; raised to the level's concurrency so every client sends one
  size_t rounds = 1;     // passes over all levels, each with requests / rounds of the level's requests
  size_t max_tokens = 64;
  std::string prompt = "Once upon a time";
  // RAG-like workload instead of `prompt`: every request's prompt is one shared document of this many
  // token ids followed by a question of question_tokens ids of its own (no two requests alike).
  size_t shared_prefix_tokens = 0;
  size_t question_tokens = 16;     // 0: every request's prompt is the document alone
  size_t n = 1;                    // samples per request (OpenAI's n): throughput counts every sample's tokens
  double duration_limit_s = 60.0;  // per level: no new request after it, open streams are cut
  double temperature = 0.0;
  bool ignore_eos = true;  // every request generates max_tokens tokens
  std::string api_key;
  std::string model;  // "" leaves the field out (the server's default model)

  Status validate() const;
};

struct LevelResult {
  size_t concurrency = 0;
  size_t rounds = 1;  // passes merged into this result (wall time summed over them)
  size_t requests_sent = 0;
  size_t requests_ok = 0;
  size_t requests_failed = 0;
  size_t requests_cut = 0;  // still streaming at the time limit
  uint64_t completion_tokens = 0;
  uint64_t prompt_tokens = 0;  // as the server counted them (usage)
  uint64_t cached_tokens = 0;  // of those, reused from its prefix cache
  double wall_seconds = 0.0;
  double tokens_per_second = 0.0;
  double ttft_p50_s = 0.0, ttft_p99_s = 0.0;
  double itl_p50_s = 0.0, itl_p99_s = 0.0;
  std::string first_error;  // of the first failed request, if any
};

// Runs every level in order, `rounds` times over, and merges each level's passes; `on_level`
// (optional) sees each pass as it completes, `before_round` (optional) runs before each round, while
// no request is open (kvserve loadgen probes the memory bandwidth there).
std::vector<LevelResult> run_loadgen(const LoadgenConfig& config,
                                     const std::function<void(const LevelResult&)>& on_level = {},
                                     const std::function<void(size_t round)>& before_round = {});

// One step of a 64-bit linear congruential generator (Knuth's MMIX constants); its high bits are
// what the load generator's deterministic prompts draw from.
inline uint64_t next_pseudo_random(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state >> 33;
}

// Nearest-rank percentile (q in [0, 1]) of `values`; 0 when empty. Sorts `values`.
double percentile(std::vector<double>& values, double q);

// A fixed-width table, one row per level, with the speed-up over the first level.
std::string format_table(const std::vector<LevelResult>& levels);
nlohmann::json to_json(const LoadgenConfig& config, const std::vector<LevelResult>& levels);

}  // namespace kvs::bench
