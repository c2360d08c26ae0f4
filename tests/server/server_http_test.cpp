// The real `kvserve serve` over raw HTTP: endpoints, OpenAI-style errors, auth, limits, greedy
// output equal to `kvserve run --temp 0`, streaming, client disconnects and clean shutdown.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <functional>
#include <thread>

#include "server_process.h"

namespace kvs::test {
namespace {

using nlohmann::json;

class ServerHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::signal(SIGPIPE, SIG_IGN);
    // ctest runs each test of this suite as its own process, possibly at the same time.
    dir_ = new TempDir("server_http_" + std::to_string(getpid()));
    server_ = new ServerProcess(*dir_, {});
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->terminate(), 0) << server_->stderr_text();
    delete server_;
    delete dir_;
  }
  void SetUp() override { ASSERT_TRUE(server_->started()); }

  static TempDir* dir_;
  static ServerProcess* server_;
};
TempDir* ServerHttp::dir_ = nullptr;
ServerProcess* ServerHttp::server_ = nullptr;

// The error object of a failed request: status, param and a message mentioning `mention`.
void expect_api_error(const HttpResult& r, int status, const std::string& param, const std::string& mention) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  const json& e = j["error"];
  EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
  EXPECT_TRUE(e.contains("code")) << r.body;
  if (param.empty()) {
    EXPECT_TRUE(e["param"].is_null()) << r.body;
  } else {
    EXPECT_EQ(e["param"], param) << r.body;
  }
  EXPECT_NE(e["message"].get<std::string>().find(mention), std::string::npos) << r.body;
}

std::string run_greedy(const std::string& prompt, int max_tokens, const std::string& flags = "") {
  TempDir dir("server_http_run_" + std::to_string(getpid()));
  const std::string out = dir.file("out.txt");
  const std::string cmd = std::string("'") + KVS_BINARY + "' run -p '" + prompt + "' -n " + std::to_string(max_tokens) +
                          " --temp 0 " + flags + " > '" + out + "' 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::string text = read_file(out);
  EXPECT_EQ(text.rfind(prompt, 0), 0u) << text;
  text = text.substr(prompt.size());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

TEST_F(ServerHttp, HealthModelsAndMetrics) {
  auto client = server_->client();
  auto health = get(client, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json()["status"], "ok");
  auto models = get(client, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.json()["data"][0]["id"], "stories260K");
  EXPECT_EQ(get(client, "/v1/models/stories260K").status, 200);
  expect_api_error(get(client, "/v1/models/gpt-4"), 404, "model", "gpt-4");
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_NE(res->body.find("# TYPE kvserve_kv_blocks_used gauge"), std::string::npos) << res->body;
  EXPECT_GE(metric_value(res->body, "kvserve_kv_blocks_total"), 1.0);
  expect_api_error(get(client, "/v1/nothing"), 404, "", "Unknown endpoint");
}

TEST_F(ServerHttp, GreedyCompletionEqualsKvserveRun) {
  const std::string expected = run_greedy("Once upon a time", 30);
  EXPECT_EQ(expected.rfind(", there was a little girl named Lily.", 0), 0u) << expected;
  auto client = server_->client();
  auto r = post_json(client, "/v1/completions",
                     R"({"model":"stories260K","prompt":"Once upon a time","max_tokens":30,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "stories260K");
  EXPECT_EQ(j["choices"][0]["text"], expected);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  EXPECT_TRUE(j["choices"][0]["finish_reason"] == "length" || j["choices"][0]["finish_reason"] == "stop");
  // The file stem and a missing model field name the same model; echo puts the prompt first.
  auto echoed = post_json(client, "/v1/completions",
                          R"({"prompt":"Once upon a time","max_tokens":30,"temperature":0,"echo":true})");
  EXPECT_EQ(completion_text(echoed), "Once upon a time" + expected);
}

// A repeated prompt comes from the prefix cache (usage.prompt_tokens_details.cached_tokens, as OpenAI
// reports it) with the same text; another cache_salt shares nothing; /metrics counts the hits.
TEST_F(ServerHttp, RepeatedPromptsHitThePrefixCacheAndSaltsIsolate) {
  auto client = server_->client();
  json request = {{"prompt", json::array()}, {"max_tokens", 12}, {"temperature", 0}};
  for (int i = 0; i < 40; ++i) request["prompt"].push_back(3 + (i * 37) % 250);
  const auto first = post_json(client, "/v1/completions", request.dump());
  const auto second = post_json(client, "/v1/completions", request.dump());
  request["cache_salt"] = "tenant-b";
  const auto salted = post_json(client, "/v1/completions", request.dump());
  for (const auto* r : {&first, &second, &salted}) ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(first.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(second.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 39) << "all but the last prompt token";
  EXPECT_EQ(salted.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(completion_text(second), completion_text(first));
  EXPECT_EQ(completion_text(salted), completion_text(first));
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metric_value(metrics->body, "kvserve_prefix_cache_hits_tokens_total"), 39.0) << metrics->body;
  EXPECT_EQ(metric_value(metrics->body, "kvserve_prefix_cache_queries_tokens_total"), 120.0);
  EXPECT_GT(metric_value(metrics->body, "kvserve_kv_blocks_cached_idle"), 0.0);
  request["cache_salt"] = 7;
  expect_api_error(post_json(client, "/v1/completions", request.dump()), 400, "cache_salt", "cache_salt");
}

// A request's own eviction policy: 1,100 tokens, twice the context, through a cache of 64 tokens; the
// text equals kvserve run's under the same policy; /metrics counts the evictions; a policy the engine cannot
// run is refused with the reason.
TEST_F(ServerHttp, ARequestsKvPolicyRunsPastTheContext) {
  auto client = server_->client();
  const json request = {{"prompt", "Once upon a time"},
                        {"max_tokens", 1100},
                        {"temperature", 0},
                        {"ignore_eos", true},
                        {"kv_policy", {{"type", "sinks"}, {"budget", 64}}}};
  const auto r = post_json(client, "/v1/completions", request.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["completion_tokens"], 1100);
  EXPECT_EQ(completion_text(r), run_greedy("Once upon a time", 1100, "--ignore-eos --kv-policy sinks --kv-budget 64"));
  const auto metrics = get(client, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_GE(metric_value(metrics.body, "kvserve_kv_evicted_tokens_total"), 1100 - 64) << metrics.body;
  json too_big = request;
  too_big["kv_policy"]["budget"] = 4096;
  expect_api_error(post_json(client, "/v1/completions", too_big.dump()), 400, "kv_policy",
                   "exceeds the model's context of 512");
  json no_budget = request;
  no_budget["kv_policy"].erase("budget");
  expect_api_error(post_json(client, "/v1/completions", no_budget.dump()), 400, "kv_policy.budget", "budget");
}

TEST_F(ServerHttp, StopStringEndsBeforeIt) {
  auto client = server_->client();
  auto r = post_json(client, "/v1/completions",
                     R"({"prompt":"Once upon a time","max_tokens":100,"temperature":0,"stop":"Lily"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(completion_text(r), ", there was a little girl named ");
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerHttp, StreamingMatchesNonStreamingAndEndsWithDone) {
  auto client = server_->client();
  const std::string whole = completion_text(
      post_json(client, "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":40,"temperature":0})"));
  auto r = post_json(client, "/v1/completions",
                     R"({"prompt":"Once upon a time","max_tokens":40,"temperature":0,"stream":true,
                         "stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto events = sse_events(r.body);
  ASSERT_GE(events.size(), 3u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  json usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    if (!chunk["choices"].empty()) {
      text += chunk["choices"][0]["text"].get<std::string>();
      if (chunk["choices"][0]["finish_reason"].is_string()) finish = chunk["choices"][0]["finish_reason"];
    }
    if (chunk["usage"].is_object()) usage = chunk["usage"];
  }
  EXPECT_EQ(text, whole);
  EXPECT_FALSE(finish.empty());
  EXPECT_EQ(usage["prompt_tokens"], 5);
}

// n = 3 with a seed: choice i is what a request with seed + i draws, whole or streamed (chunks carry
// their choice's index); usage counts the prompt once. best_of = 3, n = 1: the one choice is one of them.
TEST_F(ServerHttp, ParallelSamplesEqualSeparateSeededRequests) {
  auto client = server_->client();
  const auto body = [](int seed, int n, int best_of, bool stream) {
    json r = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", seed}, {"n", n},
              {"best_of", best_of},           {"stream", stream}, {"ignore_eos", true}};
    return r.dump();
  };
  std::vector<std::string> separate;
  for (int i = 0; i < 3; ++i)
    separate.push_back(completion_text(post_json(client, "/v1/completions", body(40 + i, 1, 1, false))));
  EXPECT_TRUE(separate[0] != separate[1] || separate[1] != separate[2]) << "different seeds should differ";

  const auto whole = post_json(client, "/v1/completions", body(40, 3, 3, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json j = whole.json();
  ASSERT_EQ(j["choices"].size(), 3u) << whole.body;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], separate[i]) << "choice " << i;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3 * 24);

  const auto streamed = post_json(client, "/v1/completions", body(40, 3, 3, true));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::vector<std::string> texts(3);
  for (const std::string& event : sse_events(streamed.body)) {
    if (event == "[DONE]") continue;
    const json chunk = json::parse(event);
    for (const json& c : chunk["choices"]) texts.at(c["index"].get<size_t>()) += c["text"].get<std::string>();
  }
  EXPECT_EQ(texts, separate);

  const auto best = post_json(client, "/v1/completions", body(40, 1, 3, false));
  ASSERT_EQ(best.status, 200) << best.body;
  ASSERT_EQ(best.json()["choices"].size(), 1u);
  EXPECT_NE(std::find(separate.begin(), separate.end(), completion_text(best)), separate.end());
  EXPECT_EQ(best.json()["usage"]["completion_tokens"], 3 * 24) << "the discarded samples are counted too";
}

TEST_F(ServerHttp, ChatCompletionWithThePlainTemplate) {
  auto client = server_->client();
  auto r = post_json(client, "/v1/chat/completions",
                     R"({"messages":[{"role":"system","content":"Tell stories."},{"role":"user","content":"A story"}],
                         "max_tokens":20,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 20);
  auto stream = post_json(client, "/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"A story"}],"max_tokens":5,"stream":true})");
  const auto events = sse_events(stream.body);
  ASSERT_GE(events.size(), 2u) << stream.body;
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST_F(ServerHttp, BadRequestsGetOpenAiErrors) {
  auto client = server_->client();
  const auto completions = [&](const std::string& body) { return post_json(client, "/v1/completions", body); };
  expect_api_error(completions("{\"prompt\": oops}"), 400, "", "not valid JSON");
  expect_api_error(completions(R"({"prompt":"x","max_tokens":"ten"})"), 400, "max_tokens", "must be an integer");
  expect_api_error(completions(R"({"prompt":"x","max_tokens":0})"), 400, "max_tokens", "between 1 and 512");
  expect_api_error(completions(R"({"prompt":"x","max_tokens":9999})"), 400, "max_tokens", "context length");
  expect_api_error(completions(R"({"prompt":"x","n":2,"best_of":3,"stream":true})"), 400, "best_of",
                   "cannot be streamed");
  expect_api_error(completions(R"({"prompt":"x","colour":"red"})"), 400, "colour", "Unrecognized");
  expect_api_error(completions(R"({"prompt":"x","model":"gpt-4"})"), 404, "model", "gpt-4");
  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += "Lily ";
  auto too_long = completions(json{{"prompt", long_prompt}}.dump());
  expect_api_error(too_long, 400, "prompt", "context holds 512");
  EXPECT_EQ(too_long.json()["error"]["code"], "context_length_exceeded");
  expect_api_error(post_json(client, "/v1/chat/completions", R"({"messages":[{"role":"user"}]})"), 400,
                   "messages[0].content", "must be a string");
}

TEST_F(ServerHttp, BodyOverTheLimitIs413) {
  auto client = server_->client();
  const std::string body = R"({"prompt":")" + std::string(2 << 20, 'a') + R"("})";
  auto r = post_json(client, "/v1/completions", body);
  expect_api_error(r, 413, "", "larger than the limit of 1048576 bytes");
  EXPECT_NE(r.body.find(std::to_string(body.size()) + " bytes"), std::string::npos) << "names the body's size";
  // curl -d sends JSON as a url-encoded form, whose bodies httplib limits to 8 KiB: the error says so, and how to
  // send it; a small one is read as the JSON it is.
  const std::string form_type = "application/x-www-form-urlencoded";
  const std::string big = json{{"prompt", std::string(9000, 'a')}, {"max_tokens", 1}}.dump();
  auto form = client.Post("/v1/completions", big, form_type.c_str());
  ASSERT_TRUE(form);
  expect_api_error({form->status, form->body}, 413, "", "was sent as application/x-www-form-urlencoded");
  EXPECT_NE(form->body.find("limited to 8192 bytes"), std::string::npos) << form->body;
  EXPECT_NE(form->body.find("Content-Type: application/json"), std::string::npos) << form->body;
  auto small = client.Post("/v1/completions", R"({"prompt":"Once","max_tokens":2})", form_type.c_str());
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200) << small->body;
}

TEST_F(ServerHttp, StreamingClientThatHangsUpIsCancelled) {
  auto client = server_->client();
  const double aborted_before = metric_value(get(client, "/metrics").body, "kvserve_requests_aborted_total");
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt":"Once upon a time","max_tokens":500,"ignore_eos":true,"stream":true})";
  req.set_header("Content-Type", "application/json");
  size_t received = 0;
  req.content_receiver = [&](const char*, size_t n, uint64_t, uint64_t) {
    received += n;
    return false;  // hang up after the first bytes
  };
  httplib::Response res;
  httplib::Error error;
  auto hangup = server_->client();
  hangup.send(req, res, error);
  EXPECT_GT(received, 0u);
  // The server notices at its next write, cancels, and the request's blocks go back to the pool.
  double aborted = aborted_before, used = -1;
  for (int i = 0; i < 200 && (aborted <= aborted_before || used != 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string metrics = get(client, "/metrics").body;
    aborted = metric_value(metrics, "kvserve_requests_aborted_total");
    used = metric_value(metrics, "kvserve_kv_blocks_used");
  }
  EXPECT_EQ(aborted, aborted_before + 1);
  EXPECT_EQ(used, 0);
}

// --log-requests says how many prompt tokens came from the prefix cache; --no-prefix-cache turns it off.
TEST(ServerPrefixCache, TheLogCountsHitsAndTheFlagTurnsTheCacheOff) {
  std::signal(SIGPIPE, SIG_IGN);
  const std::string prompt =
      R"({"prompt":"Once upon a time, there was a little girl","max_tokens":4,"temperature":0,"ignore_eos":true})";
  for (const bool off : {false, true}) {
    TempDir dir("server_prefix_" + std::to_string(off) + "_" + std::to_string(getpid()));
    std::vector<std::string> args = {"--log-requests"};
    if (off) args.push_back("--no-prefix-cache");
    ServerProcess server(dir, args);
    ASSERT_TRUE(server.started());
    EXPECT_NE(server.stdout_text().find(off ? "(prefix cache off)" : "(prefix cache on)"), std::string::npos)
        << server.stdout_text();
    auto client = server.client();
    const auto first = post_json(client, "/v1/completions", prompt);
    const auto second = post_json(client, "/v1/completions", prompt);
    ASSERT_EQ(second.status, 200) << second.body;
    const size_t prompt_tokens = second.json()["usage"]["prompt_tokens"].get<size_t>();
    const size_t cached = off ? 0 : prompt_tokens - 1;
    EXPECT_EQ(second.json()["usage"]["prompt_tokens_details"]["cached_tokens"], cached);
    EXPECT_EQ(completion_text(second), completion_text(first));
    EXPECT_EQ(server.terminate(), 0);
    const std::string log = server.stderr_text();
    EXPECT_NE(log.find(fmt::format("prompt {} tokens ({} from the prefix cache), 4 generated", prompt_tokens, cached)),
              std::string::npos)
        << log;
  }
}

TEST(ServerAuth, ApiKeyGuardsTheApiButNotHealth) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_auth");
  ServerProcess server(dir, {"--api-key", "s3cret"});
  ASSERT_TRUE(server.started());
  auto client = server.client();
  const std::string body = R"({"prompt":"Once","max_tokens":3})";
  auto missing = post_json(client, "/v1/completions", body);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(missing.json()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post_json(client, "/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(get(client, "/v1/models").status, 401);
  EXPECT_EQ(post_json(client, "/v1/completions", body, {{"Authorization", "Bearer s3cret"}}).status, 200);
  EXPECT_EQ(get(client, "/health").status, 200);
  EXPECT_EQ(server.terminate(), 0);
}

// --cors-origin: a preflight from an allowed origin is answered without the API key, with the methods and headers;
// every response to it (errors, streams) names the origin; another origin, or a server without the flag, gets no
// CORS header (the browser then refuses the page's call).
TEST(ServerCors, AllowedOriginsGetPreflightsAndHeadersOthersDoNot) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_cors");
  ServerProcess server(dir, {"--api-key", "k", "--cors-origin", "http://localhost:3000,http://app.example"});
  ASSERT_TRUE(server.started());
  auto client = server.client();
  const httplib::Headers preflight = {{"Origin", "http://app.example"},
                                      {"Access-Control-Request-Method", "POST"},
                                      {"Access-Control-Request-Headers", "authorization,content-type"}};
  auto options = client.Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(options);
  EXPECT_EQ(options->status, 204);
  EXPECT_EQ(options->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(options->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(options->get_header_value("Access-Control-Allow-Headers"), "authorization,content-type");
  const httplib::Headers call = {{"Origin", "http://localhost:3000"}, {"Authorization", "Bearer k"}};
  for (const bool stream : {false, true}) {
    auto res = client.Post("/v1/completions", call,
                           json{{"prompt", "Once"}, {"max_tokens", 3}, {"stream", stream}}.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000") << "stream " << stream;
    EXPECT_EQ(res->get_header_value("Vary"), "Origin");
  }
  auto unauthorized = client.Get("/v1/models", {{"Origin", "http://localhost:3000"}});
  ASSERT_TRUE(unauthorized);
  EXPECT_EQ(unauthorized->status, 401);
  EXPECT_EQ(unauthorized->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000")
      << "the page can read why it failed";
  auto other = client.Options("/v1/completions", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(server.terminate(), 0);

  TempDir closed_dir("server_cors_closed");
  ServerProcess closed(closed_dir, {});  // the default: no CORS
  ASSERT_TRUE(closed.started());
  auto plain = closed.client();
  auto res = plain.Get("/v1/models", {{"Origin", "http://localhost:3000"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(closed.terminate(), 0);
  TempDir bad_dir("server_cors_bad");
  const std::string cmd = std::string("'") + KVS_BINARY + "' serve --cors-origin localhost:3000 > /dev/null 2> '" +
                          bad_dir.file("err") + "'";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(read_file(bad_dir.file("err")).find("scheme://host[:port]"), std::string::npos);
}

// A synthetic model with a long context that generates ~100 tokens/s on two cores, so a request
// of thousands of tokens is still running seconds later.
std::string make_slow_model(const TempDir& dir) {
  const std::string model = dir.file("slow.gguf");
  const std::string synth =
      std::string("'") + KVS_BINARY +
      "' synth --layers 8 --dim 512 --heads 8 --ffn 1536 --vocab 512 --ctx 8192 --type q8_0 -o '" + model +
      "' > /dev/null 2>&1";
  EXPECT_EQ(std::system(synth.c_str()), 0);
  return model;
}

double wait_for_metric(httplib::Client& client, const std::string& name, const std::function<bool(double)>& done,
                       std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  double value = metric_value(get(client, "/metrics").body, name);
  while (!done(value) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    value = metric_value(get(client, "/metrics").body, name);
  }
  return value;
}

TEST(ServerDisconnect, NonStreamingClientThatHangsUpIsCancelled) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_disconnect");
  ServerProcess server(dir, {"-m", make_slow_model(dir), "--kv-memory", "64MiB"});
  ASSERT_TRUE(server.started());
  {
    auto impatient = server.client(/*read_timeout_s=*/1);  // gives up after 1 s and closes
    auto r = post_json(impatient, "/v1/completions", R"({"prompt":"Once","max_tokens":8000,"ignore_eos":true})");
    EXPECT_EQ(r.status, -1) << "the request should still be running: " << r.body.substr(0, 200);
  }
  auto client = server.client();
  // The server writes a space (valid leading JSON whitespace) each second while it waits; the
  // write after the hang-up fails, and the request is cancelled.
  EXPECT_EQ(wait_for_metric(
                client, "kvserve_requests_aborted_total", [](double v) { return v >= 1; }, std::chrono::seconds(15)),
            1);
  EXPECT_EQ(wait_for_metric(
                client, "kvserve_kv_blocks_used", [](double v) { return v == 0; }, std::chrono::seconds(5)),
            0);
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

TEST(ServerShutdown, SigtermEndsOpenStreamsAndExitsZero) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_shutdown");
  ServerProcess server(dir, {"-m", make_slow_model(dir), "--kv-memory", "64MiB"});
  ASSERT_TRUE(server.started());
  std::string body;
  std::thread reader([&] {
    auto client = server.client();
    body =
        post_json(client, "/v1/completions", R"({"prompt":"Once","max_tokens":8000,"ignore_eos":true,"stream":true})")
            .body;
  });
  // Wait for the request to be generating, then stop the server.
  auto client = server.client();
  wait_for_metric(
      client, "kvserve_generation_tokens_total", [](double v) { return v >= 5; }, std::chrono::seconds(20));
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
  reader.join();
  const auto events = sse_events(body);
  ASSERT_GE(events.size(), 2u) << body.substr(0, 500);
  EXPECT_EQ(events.back(), "[DONE]");
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "abort") << events[events.size() - 2];
  EXPECT_NE(server.stdout_text().find("kvserve: stopped"), std::string::npos);
}

// A DeepSeek-V2 model (latent KV cache, experts) behind the server: requests sent at once, sharing a prompt prefix,
// each get what they get alone (greedy), and the shared prefix is served from the cache.
TEST(ServerMla, ConcurrentRequestsOnADeepseek2ModelGetTheirOwnOutputs) {
  std::signal(SIGPIPE, SIG_IGN);
  TempDir dir("server_mla");
  const std::string model = dir.file("deepseek2.gguf");
  const std::string synth =
      std::string("'") + KVS_BINARY + "' synth --preset tiny-deepseek2 -o '" + model + "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(synth.c_str()), 0);
  ServerProcess server(dir, {"-m", model, "--max-seqs", "4", "--kv-dtype", "f16"});
  ASSERT_TRUE(server.started()) << server.stderr_text();
  const std::string shared = "the quick brown fox jumps over the lazy dog and then ";
  const std::vector<std::string> prompts = {shared + "runs", shared + "sleeps", shared + "eats", "a different start"};
  const auto complete = [&](const std::string& prompt) {
    auto client = server.client();
    const json body = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
    const auto r = post_json(client, "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["choices"][0]["text"].get<std::string>() : std::string();
  };
  std::vector<std::string> alone;
  for (const std::string& p : prompts) alone.push_back(complete(p));
  std::vector<std::string> together(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) threads.emplace_back([&, i] { together[i] = complete(prompts[i]); });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_FALSE(alone[i].empty());
    EXPECT_EQ(together[i], alone[i]) << prompts[i];
  }
  auto client = server.client();
  EXPECT_GT(metric_value(get(client, "/metrics").body, "kvserve_prefix_cache_hits_tokens_total"), 0);
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

}  // namespace
}  // namespace kvs::test
