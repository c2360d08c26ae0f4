#include "bench/loadgen_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/sse_parser.h"

namespace kvs::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Reads one event payload into `timing`; returns false when the stream is over.
bool on_event(const std::string& data, Clock::time_point start, Clock::time_point& last_text, size_t& text_chunks,
              bool& done, StreamTiming& timing) {
  if (data == "[DONE]") {
    done = true;
    return false;
  }
  const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded()) {
    timing.error = "a stream event is not JSON: " + data.substr(0, 80);
    return false;
  }
  if (chunk.contains("error")) {
    timing.error = chunk["error"].value("message", chunk.dump());
    return false;
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) {
    const nlohmann::json& usage = chunk["usage"];
    timing.completion_tokens = usage.value("completion_tokens", size_t{0});
    timing.prompt_tokens = usage.value("prompt_tokens", size_t{0});
    if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object())
      timing.cached_tokens = usage["prompt_tokens_details"].value("cached_tokens", size_t{0});
  }
  const auto& choices = chunk.value("choices", nlohmann::json::array());
  if (choices.empty() || !choices[0].contains("text") || !choices[0]["text"].is_string() ||
      choices[0]["text"].get_ref<const std::string&>().empty()) {
    return true;
  }
  if (choices[0].value("index", 0) == 0) timing.text += choices[0]["text"].get_ref<const std::string&>();
  const Clock::time_point now = Clock::now();
  if (text_chunks == 0) {
    timing.ttft_s = seconds(now - start);
  } else {
    timing.gaps_s.push_back(seconds(now - last_text));
  }
  last_text = now;
  ++text_chunks;
  return true;
}

}  // namespace

Status probe_server(const LoopbackUrl& url, const std::string& api_key) {
  httplib::Client client(url.host, url.port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(30));
  if (!api_key.empty()) client.set_bearer_token_auth(api_key);
  auto res = client.Get("/v1/models");
  const std::string where = fmt::format("http://{}:{}", url.host, url.port);
  if (!res) return Status::io_error(fmt::format("no server answers at {}: {}", where, httplib::to_string(res.error())));
  if (res->status != 200) {
    return Status::invalid_argument(
        fmt::format("{}/v1/models answered HTTP {}: {}", where, res->status, res->body.substr(0, 200)));
  }
  return Status::ok();
}

StreamTiming stream_completion(const LoopbackUrl& url, const std::string& body, const std::string& api_key,
                               Clock::time_point deadline) {
  StreamTiming timing;
  httplib::Client client(url.host, url.port);
  client.set_connection_timeout(std::chrono::seconds(10));
  client.set_read_timeout(std::max(std::chrono::seconds(10), std::chrono::duration_cast<std::chrono::seconds>(
                                                                 deadline - Clock::now() + std::chrono::seconds(10))));
  if (!api_key.empty()) client.set_bearer_token_auth(api_key);

  server::SseParser parser;
  std::string error_body;
  Clock::time_point last_text{};
  size_t text_chunks = 0;
  bool done = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  const Clock::time_point start = Clock::now();
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(size, 4096));
    for (const std::string& event : parser.feed(std::string_view(data, size))) {
      if (!on_event(event, start, last_text, text_chunks, done, timing)) return false;
    }
    if (Clock::now() > deadline) {
      timing.cut = true;
      return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  if (timing.completion_tokens == 0) timing.completion_tokens = text_chunks;
  if (done && res.status == 200) {
    timing.ok = true;
  } else if (timing.error.empty() && !timing.cut) {
    timing.error = !sent && error != httplib::Error::Canceled
                       ? "request failed: " + httplib::to_string(error)
                       : "HTTP " + std::to_string(res.status) + ": " + error_body.substr(0, 300);
  }
  return timing;
}

}  // namespace kvs::bench
