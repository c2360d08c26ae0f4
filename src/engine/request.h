// A generation request inside the engine, in two parts: what the scheduler sees (SequenceState: its
// tokens, prompt then generated) and its output state (sampler, detokenizer, stop strings, sink).
// How many tokens already have K/V is the KV manager's one count (KvCacheManager::num_tokens).
// There is no prefill or decode phase: the scheduler gives a sequence tokens until its computed
// count catches up with num_tokens(); a decode step is one new token.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/ids.h"
#include "core/status.h"
#include "engine/capabilities.h"
#include "engine/sampler.h"
#include "engine/stop_matcher.h"
#include "grammar/json_schema.h"
#include "kv/policies/kv_policy.h"
#include "kv/policies/slot_scores.h"
#include "tokenizer/tokenizer.h"

namespace kvs {

// kKvCacheFull: the KV pool ran out mid-generation; what was generated so far is kept.
// kAborted: cancelled by the client.
// kDocumentComplete: a constrained output (JSON mode) is whole.
// kDeviceError: the device the model runs on failed a step of the request (finish_detail names it).
enum class FinishReason {
  kLength,
  kEos,
  kStopString,
  kContextFull,
  kKvCacheFull,
  kAborted,
  kDocumentComplete,
  kDeviceError
};
std::string_view finish_reason_name(FinishReason reason);  // OpenAI names: "length" / "stop" (and "abort", "error")

// Called with the next-token logits computed after the token at `position` ([vocab]).
using LogitsSink = std::function<void(size_t position, std::span<const float> logits)>;

// One eviction of a request's cache (for tests and tracing): when `num_tokens` tokens were computed and
// its `num_slots` slots were full, the slots kept, ascending: one set per layer and KV head (row layer *
// num_kv_heads + head), or one for all.
struct KvEvictionEvent {
  size_t num_tokens = 0;
  size_t num_slots = 0;
  std::span<const std::vector<uint32_t>> kept;
};
using EvictionSink = std::function<void(const KvEvictionEvent&)>;

struct EngineCapabilities;

struct RequestParams {
  std::vector<TokenId> prompt = {};
  size_t max_new_tokens = 256;  // 0: compute the prompt only (e.g. for its logits)
  SamplingParams sampling = {};
  std::vector<std::string> stop_strings = {};
  bool stop_at_eos = true;
  // The baseline without a KV cache: every token's K/V are forgotten after it is sampled, so each
  // step recomputes the whole history (same tokens, O(n^2) work).
  bool recompute_history = false;
  bool all_logits = false;      // logits after every computed token (cached ones have none), not only the last
  LogitsSink on_logits = {};    // receives every logits row computed for this request, in order
  std::string cache_salt = {};  // requests with different salts never share cached K/V (tenants)
  // > 0: every layer of this request attends to its last kv_window tokens at most, and the blocks before
  // them are freed (as --kv-window, for one request).
  size_t kv_window = 0;
  // Which cached tokens stay when the cache reaches a budget (kv/policies/kv_policy.h); none: the engine's
  // default (--kv-policy). A request under a policy that evicts may run past the model's context.
  std::optional<KvPolicyParams> kv_policy = {};
  EvictionSink on_eviction = {};  // receives each eviction of the request's cache
  // Parallel sampling (OpenAI's n, best_of): this many independent samples of the prompt, each a
  // sequence of its own that shares the prompt's KV blocks; sample i draws with seed + i. Their
  // outputs carry the sample index; the request ends when every sample has finished.
  size_t num_samples = 1;
  bool track_logprob = false;  // outputs carry each sample's cumulative log-probability (best_of)
  // OpenAI's logprobs: each generated token's log-probability and this many most likely alternatives (0-20).
  std::optional<size_t> logprobs = {};
  // Each prompt token's but the first (completions' echo with logprobs), with this many alternatives: the whole
  // prompt is computed (no prefix-cache hit), its logits rows read.
  std::optional<size_t> prompt_logprobs = {};
  // JSON mode (OpenAI's response_format json_object): every token is drawn among those that continue one valid JSON
  // object (grammar/json_constraint.h), and generation ends when the object is complete.
  bool json_object = false;
  // Structured outputs (response_format json_schema): every token is drawn among those that continue an instance of
  // this schema (grammar/schema_machine.h), and generation ends when the instance is complete.
  std::shared_ptr<const JsonSchema> json_schema = {};

  // Whether an engine of `caps` can run this request (the KV pool's room aside): an error naming the problem, the
  // value and, for features that do not combine, both features (engine/capabilities.h) and the field at fault.
  Status validate(const EngineCapabilities& caps) const;
};

// What an engine offers its requests, which RequestParams::validate checks against.
struct EngineCapabilities {
  FeatureSet features;  // the engine's (its model and configuration), without an eviction policy
  size_t context_length = 0;
  size_t vocab_size = 0;
  size_t key_tails = 0;   // key tails for keys quantized per channel (0: none needed)
  size_t block_size = 0;  // eviction units resolve to it
  KvPolicyParams default_policy = {};
  bool every_layer_windowed = false;  // the engine's layers all attend to a window

  // The eviction policy a request of `p` runs under (resolved).
  KvPolicyParams policy_of(const RequestParams& p) const {
    return p.kv_policy.value_or(default_policy).resolved(block_size);
  }
  // Whether its memory stays bounded past the context: under an eviction policy (positions within the cache) or a
  // window on every layer (positions in the sequence, past those the model was trained on: docs/KV_CACHE.md).
  bool runs_past_context(const RequestParams& p) const {
    return policy_of(p).evicts() || p.kv_window > 0 || every_layer_windowed;
  }
};

// What the engine reports for a request after a step: new text and tokens, and at the end the
// finish reason and usage. An error (non-ok status) ends the request too.
struct RequestOutput {
  SeqId id;                         // the request's (what add_request returned), for every sample
  size_t sample = 0;                // which of the request's num_samples
  std::string text;                 // new text since the previous output (never a partial stop string)
  std::vector<TokenId> new_tokens;  // new generated ids
  bool finished = false;
  FinishReason finish_reason = FinishReason::kLength;
  size_t prompt_tokens = 0;
  size_t completion_tokens = 0;
  size_t cached_tokens = 0;   // at the end: prompt tokens whose K/V came from the prefix cache
  size_t kv_blocks_held = 0;  // at the end: the KV blocks the request held when it finished (every layer group)
  size_t kv_bytes_held = 0;   // and their bytes
  std::string finish_detail;  // at the end: why, when the reason needs words (kKvCacheFull)
  Status error;               // set when the request failed
  // With track_logprob: the sum over the sample's generated tokens so far of log p(token), p the
  // model's softmax (before temperature and penalties). EOS counts, though it is not among new_tokens.
  double cumulative_logprob = 0.0;
  std::vector<TokenLogprob> logprobs;         // with RequestParams::logprobs: one per new_tokens entry
  std::vector<TokenLogprob> prompt_logprobs;  // with RequestParams::prompt_logprobs, in the first output: tokens 1..
};
using OutputSink = std::function<void(const RequestOutput&)>;

// Scheduling state only: unit tests of the scheduler build these with no model or tokenizer.
struct SequenceState {
  SequenceState(SeqId id_, std::vector<TokenId> tokens_)
      : id(id_), tokens(std::move(tokens_)), num_prompt_tokens(tokens.size()) {}

  size_t num_tokens() const { return tokens.size(); }
  size_t num_generated() const { return tokens.size() - num_prompt_tokens; }

  SeqId id;
  std::vector<TokenId> tokens;  // prompt + generated
  size_t num_prompt_tokens = 0;
  size_t num_preemptions = 0;
  size_t computed_at_preemption = 0;  // tokens it had computed when last preempted, until it resumes
  bool all_logits = false;            // the batch computes logits for each of its tokens, not only a chunk's last
  bool use_prefix_cache = true;       // look up cached prefixes when admitted
  uint32_t prefix_namespace = 0;      // the KV manager's namespace of its cache salt
  size_t kv_window = 0;               // > 0: its own sliding window (RequestParams::kv_window)
  size_t kv_budget = 0;               // > 0: an eviction policy holds its cache to this many slots
  SlotMass slot_mass = {};            // where attention adds the mass its slots receive (heavy hitters)
  size_t num_cached_tokens = 0;       // tokens the prefix cache supplied at its first admission
  size_t num_forks = 0;               // samples forked from it once its prompt is computed (seats held for them)
  bool kv_loading = false;            // blocks of its prefix are on their way from disk: not admitted until they are
  bool kv_load_over = false;          // it waited for its prefix (or chose not to): it waits no more
  SteadyTime kv_load_since = {};      // when it began to wait for its prefix
  SteadyTime kv_load_deadline = {};  // when the wait ends however it goes: the timeout past computing what it waits for
};

class LogitsProcessor;  // engine/logits_processor.h

struct Request : SequenceState {
  Request(SeqId id, RequestParams params, const Tokenizer& tokenizer, OutputSink sink, SteadyTime arrival);
  ~Request();

  RequestParams params;
  SeqId request_id;   // the request it is a sample of: its own id for sample 0
  size_t sample = 0;  // index among the request's samples
  double cumulative_logprob = 0.0;
  std::vector<TokenLogprob> prompt_logprobs;  // prompt tokens 1.. so far (RequestParams::prompt_logprobs)
  bool prompt_logprobs_sent = false;
  Sampler sampler;
  StreamingDecoder decoder;
  StopMatcher stops;
  OutputSink sink;
  SteadyTime arrival;
  SteadyTime last_token_time{};
  bool has_first_token = false;
  bool runs_past_context = false;                     // its memory is bounded: it may outgrow the model's context
  std::unique_ptr<KvEvictionPolicy> kv_policy;        // null: no eviction
  std::unique_ptr<SlotScores> kv_scores;              // the policy's scores, when it needs them
  std::unique_ptr<LogitsProcessor> logits_processor;  // what constrains its next token (JSON mode); null: nothing
};

}  // namespace kvs
