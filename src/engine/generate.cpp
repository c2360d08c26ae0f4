#include "engine/generate.h"

#include <chrono>

namespace kvs {

Expected<GenerationResult> generate(Engine& engine, RequestParams params, const TextSink& on_text) {
  KVS_ASSERT(!engine.has_work(), "generate() runs one request on an idle engine");
  if (params.num_samples != 1) {
    return Status::invalid_argument(
        fmt::format("generate() runs one sample of a prompt, got {} samples", params.num_samples));
  }
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  GenerationResult result;
  result.prompt_tokens = params.prompt.size();
  const auto start = Clock::now();
  auto first_token = start;
  bool has_first = false, finished = false;
  auto id = engine.add_request(std::move(params), [&](const RequestOutput& out) {
    if (!out.new_tokens.empty() && !has_first) {
      first_token = Clock::now();
      has_first = true;
    }
    result.tokens.insert(result.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    result.text += out.text;
    if (on_text && !out.text.empty()) on_text(out.text);
    if (out.finished) {
      finished = true;
      result.finish_reason = out.finish_reason;
      result.finish_detail = out.finish_detail;
      result.kv_blocks_held = out.kv_blocks_held;
      result.kv_bytes_held = out.kv_bytes_held;
      result.cached_tokens = out.cached_tokens;
    }
  });
  if (!id) return id.status();
  while (!finished && engine.step()) {
  }
  KVS_ASSERT(finished, "the engine stopped with request {} unfinished", id->value);
  const auto end = Clock::now();
  if (!has_first) first_token = end;
  result.prefill_seconds = seconds(start, first_token);
  result.decode_seconds = seconds(first_token, end);
  return result;
}

}  // namespace kvs
