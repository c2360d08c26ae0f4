// Single-prompt generation: prefill, then decode token by token with sampling and stop checks,
// streaming text as it becomes final. With use_kv_cache = false every step recomputes the whole
// history from scratch (the baseline that shows what the cache saves).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "engine/sequence_runner.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

struct GenerationOptions {
  size_t max_new_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop_strings;
  bool stop_at_eos = true;
  bool use_kv_cache = true;
  size_t max_batch_tokens = 512;  // prefill chunk
  SequenceKvOptions kv;           // block size and pool size of the sequence's KV cache

  Status validate() const;
};

// kKvCacheFull: the KV pool ran out mid-generation; what was generated so far is kept.
// kAborted: cancelled by the client.
enum class FinishReason { kLength, kEos, kStopString, kContextFull, kKvCacheFull, kAborted };
std::string_view finish_reason_name(FinishReason reason);  // OpenAI names: "length" / "stop" (and "abort")

struct GenerationResult {
  std::vector<TokenId> tokens;  // generated ids (EOS excluded)
  std::string text;             // generated text (stop string excluded)
  FinishReason finish_reason = FinishReason::kLength;
  size_t prompt_tokens = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  size_t kv_bytes = 0;     // K/V memory allocated for the sequence
  KvUsage kv_usage;        // blocks in use at the end (with the cache on)
  std::string kv_message;  // why generation stopped early with kKvCacheFull
};

using TextSink = std::function<void(std::string_view piece)>;

class Generator {
 public:
  Generator(const LlamaModel& model, const Tokenizer& tokenizer, ThreadPool& pool)
      : model_(model), tokenizer_(tokenizer), pool_(pool) {}

  // Fails (out_of_range) when the prompt does not fit in the context.
  Expected<GenerationResult> generate(std::span<const TokenId> prompt, const GenerationOptions& options,
                                      const TextSink& on_text = {});

 private:
  const LlamaModel& model_;
  const Tokenizer& tokenizer_;
  ThreadPool& pool_;
};

}  // namespace kvs
