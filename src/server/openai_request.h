// The JSON bodies of POST /v1/completions and /v1/chat/completions -> a validated ApiRequest.
// Every rejection is an OpenAI-style error naming the field and the value at fault.
//
// Sampling defaults follow OpenAI (temperature 1, top_p 1) with top_k and min_p off, so a
// request that names none of them samples from the full distribution. Extras that map onto the
// engine: top_k, min_p, repetition_penalty, ignore_eos, cache_salt, kv_window (a sliding window for this request
// alone, as --kv-window), kv_policy (this request's KV eviction policy, as --kv-policy); n and best_of (parallel
// samples of one prompt sharing its KV blocks; best_of on chat too, as vLLM does; best_of > n cannot be streamed).
// OpenAI's frequency_penalty and presence_penalty (-2..2) and logit_bias (token id -> -100..100) go to the sampler;
// logprobs (chat: a boolean with top_logprobs 0-20; completions: 0-5 alternatives, with echo the prompt's too).
// response_format json_object (JSON mode: the output is one JSON object, engine/request.h) and json_schema (structured
// outputs: an instance of the schema, grammar/json_schema.h; unsupported keywords are a 400). Chat's tools,
// tool_choice and parallel_tool_calls (server/tool_request.h, chat/tool_calls.h), with assistant tool_calls and tool
// messages in the history. Accepted only at their neutral value (else 400): suffix "", functions []. Ignored: user,
// metadata, store, service_tier, function_call. Any other field is rejected as unrecognized, as OpenAI does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "core/ids.h"
#include "engine/sampler.h"
#include "grammar/json_schema.h"
#include "kv/policies/kv_policy.h"
#include "server/api_error.h"
#include "server/tool_request.h"

namespace kvs::server {

enum class Endpoint { kCompletions, kChatCompletions };

struct RequestLimits {
  size_t context_length = 0;  // max_tokens may not exceed it
  size_t vocab_size = 0;      // token-id prompts must lie below it
  size_t max_stop_strings = 16;
  size_t max_json_depth = 64;
  size_t max_samples = 64;  // n and best_of
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // "" when not given
  // Completions: the prompt as text, or as token ids when prompt_is_tokens.
  std::string prompt_text;
  std::vector<TokenId> prompt_tokens;
  bool prompt_is_tokens = false;
  std::vector<chat::ChatMessage> messages;  // chat; "developer" is mapped to "system"
  std::optional<size_t> max_tokens;         // max_tokens or max_completion_tokens
  SamplingParams sampling;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt text comes first in the output
  bool ignore_eos = false;
  std::string cache_salt;  // requests with different salts never share cached prompt K/V (vLLM's field)
  size_t kv_window = 0;    // kvserve's: > 0, this request attends to (and keeps the K/V of) its last N tokens
  // kvserve's: the eviction policy of this request (kv/policies/kv_policy.h); none: the server's --kv-policy.
  // Under one that evicts, max_tokens may exceed the context.
  std::optional<KvPolicyParams> kv_policy;
  std::string max_tokens_key = "max_tokens";  // the field max_tokens came from
  size_t n = 1;                               // choices returned
  size_t best_of = 1;  // samples generated (>= n): the n with the highest log-probability per token are returned
  // Log-probabilities of the generated tokens (and, for completions with echo, the prompt's) with this many most
  // likely alternatives each; none: no logprobs.
  std::optional<size_t> logprobs;
  std::optional<size_t> top_logprobs;  // chat's field, as given (folded into logprobs)
  bool json_object = false;            // response_format json_object: the output is one JSON object
  bool has_json_schema = false;        // response_format json_schema: the output is an instance of json_schema
  std::shared_ptr<const JsonSchema> json_schema;
  bool has_tools = false;  // chat: tools or tool_choice given
  bool parallel_tool_calls = true;
  std::shared_ptr<const ToolRequest> tools;  // chat with tools: what the template renders and the output may call
};

ApiExpected<ApiRequest> parse_api_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits);

// The deepest nesting of arrays/objects in `text` (strings are skipped), computed without parsing,
// so absurdly nested bodies are refused before the JSON parser sees them.
size_t json_nesting_depth(std::string_view text);

}  // namespace kvs::server
