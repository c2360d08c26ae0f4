// One request run to its end on an engine with nothing else to do: the path of `kvserve run`, the
// golden tests and the benchmarks (the same Engine::step the server drives, one request at a time).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace kvs {

struct GenerationResult {
  std::vector<TokenId> tokens;  // generated ids (EOS excluded)
  std::string text;             // generated text (stop string excluded)
  FinishReason finish_reason = FinishReason::kLength;
  std::string finish_detail;  // why, when the reason needs words (KV cache exhausted)
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;      // prompt tokens whose K/V came from the prefix cache
  double prefill_seconds = 0.0;  // from the start to the first generated token
  double decode_seconds = 0.0;   // the rest
  size_t kv_blocks_held = 0;     // blocks the request held when it finished
  size_t kv_bytes_held = 0;      // their bytes (blocks of different layer groups differ in size)
};

using TextSink = std::function<void(std::string_view piece)>;

// Queues `params` and steps the engine until the request ends; errors of add_request are returned.
Expected<GenerationResult> generate(Engine& engine, RequestParams params, const TextSink& on_text = {});

}  // namespace kvs
