// The multi-turn chat workload of `kvserve loadgen --chat-turns N`: `conversations` conversations of
// `turns` turns, `clients` of them at a time, each turn a streaming /v1/completions request whose
// prompt is the whole conversation so far (the earlier user messages and the server's replies, as
// text) plus a new user message. With a prefix cache all of a turn's prompt but the new message (and
// whatever re-tokenizing the reply changes) can come from the cache; per turn it reports how much did
// (usage.prompt_tokens_details.cached_tokens) and the time to first token.
// Interleaved (--interleave-turns), the turns go out in turn-major order: every conversation's first turn,
// then every conversation's second, ... (a turn waits for its conversation's previous reply), as many
// users who each pause between turns would send them: a conversation comes back after all the others
// had a turn, so a KV pool that holds fewer conversations than there are has evicted it by then.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/loadgen.h"

namespace kvs::bench {

struct ChatConfig {
  LoopbackUrl url = {};
  size_t clients = 16;        // conversations at a time
  size_t conversations = 16;  // in all
  size_t turns = 8;
  size_t max_tokens = 32;           // per reply
  size_t message_words = 12;        // per user message
  bool interleave = false;          // turn-major order over all conversations instead of one at a time per client
  double duration_limit_s = 600.0;  // no new turn after it
  std::string api_key = {};
  std::string model = {};  // "" leaves the field out

  Status validate() const;
};

struct TurnResult {
  size_t turn = 0;  // 1-based
  size_t requests_ok = 0;
  size_t requests_failed = 0;
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t completion_tokens = 0;
  double ttft_p50_s = 0.0, ttft_p99_s = 0.0;
  std::string first_error = {};
};

std::vector<TurnResult> run_chat(const ChatConfig& config);
// One row per turn: requests, prompt tokens, the share from the cache, TTFT percentiles.
std::string format_chat_table(const std::vector<TurnResult>& turns);
// `wall_seconds`: the whole workload's, for its throughput (generated tokens / wall time).
nlohmann::json to_json(const ChatConfig& config, const std::vector<TurnResult>& turns, double wall_seconds);

}  // namespace kvs::bench
