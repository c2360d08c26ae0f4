#include "server/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "server/chat_messages.h"
#include "server/request_fields.h"

namespace kvs::server {
namespace {

using nlohmann::json;

MaybeError parse_stop(const json& v, const RequestLimits& limits, std::vector<std::string>& out) {
  std::vector<json> items = v.is_array() ? v.get<std::vector<json>>() : std::vector<json>{v};
  if (!v.is_array() && !v.is_string()) return wrong_type("stop", "a string or an array of strings", v);
  if (items.size() > limits.max_stop_strings) {
    return ApiError::invalid(
        "stop", fmt::format("'stop' may hold at most {} strings, got {}", limits.max_stop_strings, items.size()));
  }
  for (const json& item : items) {
    if (!item.is_string()) return wrong_type("stop", "a string or an array of strings", item);
    if (!item.get_ref<const std::string&>().empty()) out.push_back(item.get<std::string>());
  }
  return std::nullopt;
}

MaybeError parse_token_ids(const json& v, const RequestLimits& limits, std::vector<TokenId>& out) {
  for (const json& item : v) {
    int64_t id = 0;
    KVS_API_TRY(read_int(item, "prompt", 0, static_cast<int64_t>(limits.vocab_size) - 1, id));
    out.push_back(static_cast<TokenId>(id));
  }
  return std::nullopt;
}

// A string, a list of one string, a list of token ids, or a list of one list of token ids.
MaybeError parse_prompt(const json& v, const RequestLimits& limits, ApiRequest& r) {
  if (v.is_string()) {
    r.prompt_text = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array() || v.empty()) return wrong_type("prompt", "a string, a token id array or a one-item list", v);
  if (v[0].is_number()) {
    r.prompt_is_tokens = true;
    return parse_token_ids(v, limits, r.prompt_tokens);
  }
  if (v.size() != 1) {
    return ApiError::invalid(
        "prompt", fmt::format("'prompt' lists {} prompts; this server takes one prompt per request", v.size()));
  }
  if (v[0].is_string()) {
    r.prompt_text = v[0].get<std::string>();
    return std::nullopt;
  }
  if (v[0].is_array() && !v[0].empty()) {
    r.prompt_is_tokens = true;
    return parse_token_ids(v[0], limits, r.prompt_tokens);
  }
  return wrong_type("prompt", "a string, a token id array or a one-item list", v[0]);
}

// logit_bias: {"token id": bias}, ids below the vocabulary size, biases in [-100, 100].
MaybeError parse_logit_bias(const json& v, const RequestLimits& limits, SamplingParams& sampling) {
  if (!v.is_object()) return wrong_type("logit_bias", "an object of token ids to numbers", v);
  for (const auto& [key, value] : v.items()) {
    const std::string param = fmt::format("logit_bias.{}", key);
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || key.empty() || id < 0 || id >= static_cast<long long>(limits.vocab_size)) {
      return ApiError::invalid(param, fmt::format("'logit_bias' keys must be token ids from 0 to {}, got \"{}\"",
                                                  limits.vocab_size - 1, key));
    }
    double bias = 0;
    KVS_API_TRY(read_number(value, param, -100.0, 100.0, bias));
    sampling.logit_bias.emplace_back(static_cast<TokenId>(id), static_cast<float>(bias));
  }
  return std::nullopt;
}

// Fields accepted only at a value that changes nothing.
MaybeError check_neutral(const std::string& key, const json& v) {
  if (key == "suffix") {
    if (!v.is_string()) return wrong_type(key, "a string", v);
    if (!v.get_ref<const std::string&>().empty()) return unsupported(key, "(non-empty)");
  } else if (key == "functions") {
    if (!v.is_array()) return wrong_type(key, "an array", v);
    if (!v.empty()) return unsupported(key, "(the legacy functions; send them as 'tools')");
  }
  return std::nullopt;
}

bool is_ignored(const std::string& key) {
  return key == "user" || key == "metadata" || key == "store" || key == "service_tier" || key == "function_call";
}

bool is_neutral_only(const std::string& key) { return key == "suffix" || key == "functions"; }

// response_format: {"type": "text"} (the default), {"type": "json_object"} (JSON mode) or {"type": "json_schema",
// "json_schema": {"name": ..., "schema": {...}, "strict": ...}} (structured outputs: the schema is compiled once the
// body has been read again with its keys in order, see compile_json_schema).
MaybeError parse_response_format(const json& v, ApiRequest& r) {
  if (!v.is_object()) return wrong_type("response_format", "an object", v);
  std::string type = "text";
  if (v.contains("type")) KVS_API_TRY(read_string(v["type"], "response_format.type", type));
  if (type == "json_object") {
    r.json_object = true;
  } else if (type == "json_schema") {
    const json& spec = v.value("json_schema", json());
    if (!spec.is_object()) return wrong_type("response_format.json_schema", "an object", spec);
    if (spec.contains("name") && !spec["name"].is_string())
      return wrong_type("response_format.json_schema.name", "a string", spec["name"]);
    if (spec.contains("strict") && !spec["strict"].is_null() && !spec["strict"].is_boolean())
      return wrong_type("response_format.json_schema.strict", "a boolean", spec["strict"]);
    if (!spec.contains("schema") || !(spec["schema"].is_object() || spec["schema"].is_boolean())) {
      return ApiError::invalid("response_format.json_schema.schema",
                               "'response_format.json_schema.schema' must be a JSON Schema object", "missing_field");
    }
    r.has_json_schema = true;
  } else if (type != "text") {
    return ApiError::invalid(
        "response_format.type",
        fmt::format("'response_format.type' must be text, json_object or json_schema, got {}", shown(v["type"])));
  }
  return std::nullopt;
}

// The schema of response_format json_schema, compiled. The body is read again keeping keys in their order (json
// sorts them): properties are written in the order the schema lists them.
MaybeError compile_json_schema(const nlohmann::ordered_json& ordered, ApiRequest& r) {
  const std::string text = ordered["response_format"]["json_schema"]["schema"].dump();
  auto schema = JsonSchema::compile(text);
  if (!schema) return ApiError::invalid("response_format.json_schema.schema", schema.status().message());
  r.json_schema = std::move(*schema);
  return std::nullopt;
}

// tools and tool_choice (server/tool_request.h, chat/tool_calls.h), their schemas in the request's key order.
MaybeError read_tools(const nlohmann::ordered_json& ordered, ApiRequest& r) {
  const nlohmann::ordered_json none;
  auto tools = parse_tool_request(
      ordered.contains("tools") && !ordered["tools"].is_null() ? ordered["tools"] : nlohmann::ordered_json::array(),
      ordered.contains("tool_choice") ? ordered["tool_choice"] : none, r.parallel_tool_calls);
  if (!tools) return tools.error();
  if (tools->forced && (r.json_object || r.json_schema)) {
    return ApiError::invalid("tool_choice",
                             "a required or named 'tool_choice' does not combine with "
                             "'response_format' json_object or json_schema (the output is the call)");
  }
  r.tools = std::make_shared<const ToolRequest>(std::move(*tools));
  return std::nullopt;
}

constexpr int64_t kMaxTokensUnderPolicy = int64_t{1} << 30;

ApiError max_tokens_error(const std::string& key, const json& v, const RequestLimits& limits) {
  return ApiError::invalid(key, fmt::format("'{}' must be between 1 and {} (the model's context length), got {}", key,
                                            limits.context_length, shown(v)));
}

// kvserve's kv_policy: {"type": "window" | "sinks" | "h2o" | "full", "budget": N, "sinks": N, "recent": N,
// "scores": "head" | "pooled", "per_query": bool, "evict_unit": N}; the engine checks what the values allow.
MaybeError parse_kv_policy(const json& v, ApiRequest& r) {
  if (!v.is_object()) return wrong_type("kv_policy", "an object", v);
  KvPolicyParams p;
  int64_t integer = 0;
  bool typed = false;
  for (const auto& [field, value] : v.items()) {
    const std::string name = "kv_policy." + field;
    if (field == "type") {
      std::string type;
      KVS_API_TRY(read_string(value, name, type));
      auto kind = parse_kv_policy_kind(type);
      if (!kind) return ApiError::invalid(name, kind.status().message());
      p.kind = *kind;
      typed = true;
    } else if (field == "budget" || field == "sinks" || field == "recent" || field == "evict_unit") {
      KVS_API_TRY(read_int(value, name, field == "budget" || field == "evict_unit" ? 1 : 0,
                           std::numeric_limits<int32_t>::max(), integer));
      (field == "budget"   ? p.budget
       : field == "sinks"  ? p.sinks
       : field == "recent" ? p.recent
                           : p.evict_unit) = static_cast<size_t>(integer);
    } else if (field == "scores") {
      std::string scope;
      KVS_API_TRY(read_string(value, name, scope));
      auto parsed = parse_kv_score_scope(scope);
      if (!parsed) return ApiError::invalid(name, parsed.status().message());
      p.scores = *parsed;
    } else if (field == "per_query") {
      KVS_API_TRY(read_bool(value, name, p.per_query_scores));
    } else {
      return ApiError::invalid(name, fmt::format("unknown kv_policy field '{}' (type, budget, sinks, recent, scores, "
                                                 "per_query, evict_unit)",
                                                 field));
    }
  }
  if (!typed) return ApiError::invalid("kv_policy.type", "'kv_policy' needs a 'type' (full, window, sinks, h2o)");
  if (p.evicts() && p.budget == 0) {
    return ApiError::invalid("kv_policy.budget",
                             fmt::format("the {} policy needs a 'budget' of tokens", kv_policy_name(p.kind)));
  }
  r.kv_policy = p;
  return std::nullopt;
}

MaybeError parse_field(const std::string& key, const json& v, const RequestLimits& limits, ApiRequest& r) {
  const bool chat = r.endpoint == Endpoint::kChatCompletions;
  double number = 0;
  int64_t integer = 0;
  if (key == "model") return read_string(v, key, r.model);
  if (key == "prompt" && !chat) return parse_prompt(v, limits, r);
  if (key == "messages" && chat) return parse_messages(v, r.messages);
  if (key == "max_tokens" || (key == "max_completion_tokens" && chat)) {
    // At most the context, unless an eviction policy bounds the cache (checked once every field is read).
    if (v.is_number() && !(v.get<double>() >= 1)) return max_tokens_error(key, v, limits);
    KVS_API_TRY(read_int(v, key, 1, kMaxTokensUnderPolicy, integer));
    r.max_tokens = static_cast<size_t>(integer);
    r.max_tokens_key = key;
  } else if (key == "temperature") {
    KVS_API_TRY(read_number(v, key, 0.0, 2.0, number));
    r.sampling.temperature = static_cast<float>(number);
  } else if (key == "top_p") {
    KVS_API_TRY(read_number(v, key, 0.0, 1.0, number));
    if (number <= 0.0) return ApiError::invalid(key, "'top_p' must be greater than 0 and at most 1, got 0");
    r.sampling.top_p = static_cast<float>(number);
  } else if (key == "top_k") {
    KVS_API_TRY(read_int(v, key, -1, 1 << 24, integer));
    r.sampling.top_k = integer <= 0 ? 0 : static_cast<size_t>(integer);
  } else if (key == "min_p") {
    KVS_API_TRY(read_number(v, key, 0.0, 1.0, number));
    r.sampling.min_p = static_cast<float>(number);
  } else if (key == "frequency_penalty" || key == "presence_penalty") {
    KVS_API_TRY(read_number(v, key, -2.0, 2.0, number));
    (key == "frequency_penalty" ? r.sampling.frequency_penalty : r.sampling.presence_penalty) =
        static_cast<float>(number);
  } else if (key == "logit_bias") {
    return parse_logit_bias(v, limits, r.sampling);
  } else if (key == "logprobs" && chat) {
    bool on = false;
    KVS_API_TRY(read_bool(v, key, on));
    if (on && !r.logprobs) r.logprobs = 0;
    if (!on) r.logprobs.reset();
  } else if (key == "top_logprobs" && chat) {
    KVS_API_TRY(read_int(v, key, 0, 20, integer));
    r.top_logprobs = static_cast<size_t>(integer);
  } else if (key == "logprobs") {  // completions: how many alternatives
    KVS_API_TRY(read_int(v, key, 0, 5, integer));
    r.logprobs = static_cast<size_t>(integer);
  } else if ((key == "tools" || key == "tool_choice") && chat) {
    if (key == "tools" && !v.is_array()) return wrong_type(key, "an array of tools", v);
    r.has_tools = true;  // read with the schema's order kept, once every field is read (read_tools)
  } else if (key == "parallel_tool_calls" && chat) {
    if (!v.is_boolean()) return wrong_type(key, "a boolean", v);
    r.parallel_tool_calls = v.get<bool>();
  } else if (key == "response_format") {
    return parse_response_format(v, r);
  } else if (key == "repetition_penalty") {
    KVS_API_TRY(read_number(v, key, 0.01, 100.0, number));
    r.sampling.repetition_penalty = static_cast<float>(number);
  } else if (key == "seed") {
    KVS_API_TRY(read_int(v, key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), integer));
    r.seed = static_cast<uint64_t>(integer);
  } else if (key == "stop") {
    return parse_stop(v, limits, r.stop);
  } else if (key == "stream") {
    return read_bool(v, key, r.stream);
  } else if (key == "stream_options") {
    if (!v.is_object()) return wrong_type(key, "an object", v);
    for (const auto& [option, value] : v.items()) {
      if (option != "include_usage") return ApiError::invalid(key, fmt::format("unknown stream option '{}'", option));
      if (!value.is_null()) KVS_API_TRY(read_bool(value, "stream_options.include_usage", r.include_usage));
    }
  } else if (key == "echo" && !chat) {
    return read_bool(v, key, r.echo);
  } else if (key == "ignore_eos") {
    return read_bool(v, key, r.ignore_eos);
  } else if (key == "cache_salt") {
    return read_string(v, key, r.cache_salt);
  } else if (key == "kv_policy") {
    return parse_kv_policy(v, r);
  } else if (key == "kv_window") {
    KVS_API_TRY(read_int(v, key, 0, std::numeric_limits<int32_t>::max(), integer));
    r.kv_window = static_cast<size_t>(integer);
  } else if (key == "n" || key == "best_of") {
    KVS_API_TRY(read_int(v, key, 1, static_cast<int64_t>(limits.max_samples), integer));
    (key == "n" ? r.n : r.best_of) = static_cast<size_t>(integer);
  } else if (is_neutral_only(key)) {
    return check_neutral(key, v);
  } else if (!is_ignored(key)) {
    return ApiError::invalid(key, fmt::format("Unrecognized request argument supplied: {}", key), "unknown_field");
  }
  return std::nullopt;
}

}  // namespace

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

ApiExpected<ApiRequest> parse_api_request(Endpoint endpoint, std::string_view body, const RequestLimits& limits) {
  if (const size_t depth = json_nesting_depth(body); depth > limits.max_json_depth) {
    return ApiError::invalid(
        "", fmt::format("request body nests {} levels deep; at most {} are accepted", depth, limits.max_json_depth));
  }
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Parse again with exceptions for the position and reason of the first error.
    std::string reason = "not valid JSON";
    try {
      const json again = json::parse(body);
    } catch (const json::parse_error& e) {
      reason = e.what();
    }
    return ApiError::invalid("", fmt::format("the request body is not valid JSON: {}", reason), "invalid_json");
  }
  if (!doc.is_object()) {
    return ApiError::invalid("", fmt::format("the request body must be a JSON object, got {}", type_name(doc)));
  }
  ApiRequest r;
  r.endpoint = endpoint;
  // OpenAI's defaults; top_k and min_p are off unless asked for.
  r.sampling = SamplingParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f};
  for (const auto& [key, value] : doc.items()) {
    if (value.is_null()) continue;  // null means "not given"
    KVS_API_TRY(parse_field(key, value, limits, r));
  }
  if (r.has_json_schema || r.has_tools) {  // read again keeping keys in order (json sorts them)
    const auto ordered = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (r.has_json_schema) KVS_API_TRY(compile_json_schema(ordered, r));
    if (r.has_tools) KVS_API_TRY(read_tools(ordered, r));
  }
  if (r.max_tokens && *r.max_tokens > limits.context_length && !(r.kv_policy && r.kv_policy->evicts()))
    return max_tokens_error(r.max_tokens_key, doc[r.max_tokens_key], limits);
  const bool chat = endpoint == Endpoint::kChatCompletions;
  if (chat && r.messages.empty()) return ApiError::invalid("messages", "'messages' is required", "missing_field");
  if (!chat && doc.value("prompt", json()).is_null())
    return ApiError::invalid("prompt", "'prompt' is required", "missing_field");
  if (!r.stream && doc.contains("stream_options") && !doc["stream_options"].is_null()) {
    return ApiError::invalid("stream_options", "'stream_options' is only allowed when 'stream' is true");
  }
  if (Status s = r.sampling.validate(); !s) return ApiError::invalid("", s.message());
  if (r.top_logprobs) {  // chat: alternatives only with logprobs on, as OpenAI requires
    if (!r.logprobs) {
      return ApiError::invalid("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    }
    r.logprobs = *r.top_logprobs;
  }
  if (doc.value("best_of", json()).is_null()) {
    r.best_of = r.n;
  } else if (r.best_of < r.n) {
    return ApiError::invalid("best_of", fmt::format("'best_of' must be at least 'n' ({}), got {}", r.n, r.best_of));
  }
  if (r.stream && r.best_of > r.n) {
    return ApiError::invalid("best_of", fmt::format("'best_of' ({}) greater than 'n' ({}) cannot be streamed: the best "
                                                    "samples are known only when all have finished",
                                                    r.best_of, r.n));
  }
  return r;
}

}  // namespace kvs::server
