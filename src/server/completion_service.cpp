#include "server/completion_service.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "core/splitmix64.h"

namespace kvs::server {

CompletionService::CompletionService(EngineLoop& loop, const Tokenizer& tokenizer, const ServedModel& model,
                                     CompletionDefaults defaults)
    : loop_(loop),
      tokenizer_(tokenizer),
      model_(model),
      defaults_(defaults),
      limits_{.context_length = model.context_length, .vocab_size = tokenizer.vocab_size()},
      random_state_((uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()) {}

uint64_t CompletionService::next_random() {
  return splitmix64_mix(random_state_.fetch_add(kSplitmix64Gamma) + kSplitmix64Gamma);
}

bool CompletionService::wait_until_idle(std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (active_ > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return active_ == 0;
}

ApiExpected<RequestParams> CompletionService::to_engine_request(const ApiRequest& request, std::string& echo_text) {
  RequestParams params;
  const bool chat = request.endpoint == Endpoint::kChatCompletions;
  if (chat) {
    auto rendered = model_.chat_template.apply(request.messages, request.tools ? request.tools->tools : nullptr);
    if (!rendered) return ApiError::invalid("messages", rendered.status().message());
    std::string& text = *rendered;
    // A template that writes BOS (Llama's {{ bos_token }}) and a tokenizer that adds one would make two.
    const std::string& bos = model_.chat_template.bos_text();
    const bool adds_bos = tokenizer_.add_bos_by_default();
    if (adds_bos && !bos.empty() && text.compare(0, bos.size(), bos) == 0) text.erase(0, bos.size());
    params.prompt = tokenizer_.encode(text, adds_bos, /*parse_special=*/true);
    for (const std::string& stop : model_.chat_template.stop_strings()) params.stop_strings.push_back(stop);
  } else if (request.prompt_is_tokens) {
    params.prompt = request.prompt_tokens;
    if (request.echo) echo_text = tokenizer_.decode(params.prompt);
  } else {
    params.prompt = tokenizer_.encode(request.prompt_text, tokenizer_.add_bos_by_default());
    if (request.echo) echo_text = request.prompt_text;
  }
  const size_t room = model_.context_length > params.prompt.size() ? model_.context_length - params.prompt.size() : 1;
  params.max_new_tokens = request.max_tokens.value_or(chat ? room : defaults_.completion_max_tokens);
  params.sampling = request.sampling;
  params.sampling.seed = request.seed.value_or(next_random());
  params.stop_strings.insert(params.stop_strings.end(), request.stop.begin(), request.stop.end());
  params.stop_at_eos = !request.ignore_eos;
  params.cache_salt = request.cache_salt;
  params.kv_window = request.kv_window;
  params.kv_policy = request.kv_policy;
  params.num_samples = request.best_of;
  params.track_logprob = request.best_of > request.n;  // to rank the samples
  params.logprobs = request.logprobs;
  params.json_object = request.json_object;
  params.json_schema = request.json_schema;
  if (request.tools && request.tools->forced) params.json_schema = request.tools->forced;  // the call is certain
  if (request.logprobs && request.echo) params.prompt_logprobs = request.logprobs;
  return params;
}

ApiExpected<std::string> CompletionService::apply_template(std::string_view body) const {
  auto request = parse_api_request(Endpoint::kChatCompletions, body, limits_);
  if (!request) return request.error();
  auto rendered = model_.chat_template.apply(request->messages, request->tools ? request->tools->tools : nullptr);
  if (!rendered) return ApiError::invalid("messages", rendered.status().message());
  return std::move(*rendered);
}

ApiExpected<StartedResponse> CompletionService::start(Endpoint endpoint, std::string_view body) {
  auto request = parse_api_request(endpoint, body, limits_);
  if (!request) return request.error();
  if (!model_.accepts(request->model)) {
    return ApiError::of(
        404, "invalid_request_error", "model_not_found",
        fmt::format("The model '{}' does not exist; this server serves '{}'", request->model, model_.id), "model");
  }
  std::string echo_text;
  auto engine_request = to_engine_request(*request, echo_text);
  if (!engine_request) return engine_request.error();
  RequestParams params = std::move(*engine_request);
  // Completions' logprobs: text offsets count from the prompt's start; with echo the prompt's tokens are listed.
  const bool chat = endpoint == Endpoint::kChatCompletions;
  const size_t prompt_text_bytes = !request->logprobs || chat  ? 0
                                   : request->prompt_is_tokens ? tokenizer_.decode(params.prompt).size()
                                                               : request->prompt_text.size();
  std::vector<TokenId> echo_prompt = request->logprobs && request->echo ? params.prompt : std::vector<TokenId>();
  auto stream = loop_.submit(std::move(params));
  if (!stream) return api_error_from_status(stream.status(), chat ? "messages" : "prompt");
  ResponseMeta meta{
      .endpoint = endpoint,
      .id = fmt::format("{}-{:016x}", chat ? "chatcmpl" : "cmpl", next_random()),
      .created =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
      .model = model_.id};
  const SeqId id = (*stream)->id();
  PumpOptions options{.stream = request->stream,
                      .include_usage = request->include_usage,
                      .echo_text = echo_text,
                      .num_samples = request->best_of,
                      .num_choices = request->n,
                      .logprobs_tokenizer = request->logprobs ? &tokenizer_ : nullptr,
                      .prompt_text_bytes = prompt_text_bytes,
                      .tools = request->tools,
                      .tool_call_id_seed = next_random(),
                      .nine_character_call_ids = model_.chat_template.wants_nine_character_call_ids()};
  options.echo_prompt = std::move(echo_prompt);
  ++active_;
  auto on_close = [this, id, request_id = meta.id](const Usage* usage) {
    if (!usage) {
      loop_.cancel(id);
    } else if (defaults_.log_requests) {
      std::fprintf(stderr, "kvserve: %s: prompt %zu tokens (%zu from the prefix cache), %zu generated\n",
                   request_id.c_str(), usage->prompt_tokens, usage->cached_tokens, usage->completion_tokens);
    }
    --active_;
  };
  auto pump = std::make_shared<ResponsePump>(*stream, std::move(on_close), std::move(meta), std::move(options));
  return StartedResponse{.pump = std::move(pump), .stream = request->stream};
}

}  // namespace kvs::server
