// ResponsePump without HTTP or an engine: outputs are pushed into a RequestStream by hand.
#include "server/response_pump.h"

#include <gtest/gtest.h>

#include "server/sse_parser.h"

namespace kvs::server {
namespace {

using namespace std::chrono_literals;

RequestOutput output(std::string text, bool finished = false, FinishReason reason = FinishReason::kLength) {
  RequestOutput out;
  out.text = std::move(text);
  out.finished = finished;
  out.finish_reason = reason;
  out.prompt_tokens = 3;
  out.completion_tokens = 2;
  return out;
}

PumpOptions options(bool stream, bool include_usage = false, std::string echo_text = {},
                    std::chrono::milliseconds heartbeat = 1000ms) {
  PumpOptions o;
  o.stream = stream;
  o.include_usage = include_usage;
  o.echo_text = std::move(echo_text);
  o.heartbeat = heartbeat;
  return o;
}

RequestOutput sample_output(size_t sample, std::string text, bool finished = false, size_t completion_tokens = 2,
                            double logprob = 0.0, FinishReason reason = FinishReason::kLength) {
  RequestOutput out = output(std::move(text), finished, reason);
  out.sample = sample;
  out.completion_tokens = completion_tokens;
  out.cumulative_logprob = logprob;
  return out;
}

struct Harness {
  explicit Harness(Endpoint endpoint, PumpOptions opts) {
    opts.poll = 10ms;
    pump = std::make_unique<ResponsePump>(
        stream, [this](const Usage* usage) { closed_finished = usage ? 1 : 0; },
        ResponseMeta{.endpoint = endpoint, .id = "id-1", .created = 5, .model = "m"}, opts);
  }
  // Pumps until done or `rounds` rounds; the bytes written.
  std::string run(int rounds = 50) {
    std::string body;
    for (int i = 0; i < rounds; ++i) {
      if (pump->pump([&](std::string_view b) {
            body.append(b);
            return true;
          }) == ResponsePump::Progress::kDone)
        break;
    }
    return body;
  }
  std::shared_ptr<RequestStream> stream = std::make_shared<RequestStream>();
  std::unique_ptr<ResponsePump> pump;
  int closed_finished = -1;  // -1: not closed yet
};

TEST(ResponsePump, WholeCompletionBody) {
  Harness h(Endpoint::kCompletions, options(false, false, "Hi"));
  h.stream->push(output(" there"));
  h.stream->push(output("!", true, FinishReason::kStopString));
  const auto body = nlohmann::json::parse(h.run());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], "Hi there!");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  h.pump.reset();
  EXPECT_EQ(h.closed_finished, 1);  // finished: nothing to cancel
}

TEST(ResponsePump, ChatStreamWithUsage) {
  Harness h(Endpoint::kChatCompletions, options(true, true));
  h.stream->push(output("Hel"));
  h.stream->push(output("lo", true));
  const auto events = SseParser().feed(h.run());
  ASSERT_EQ(events.size(), 6u);
  const auto first = nlohmann::json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(nlohmann::json::parse(events[1])["choices"][0]["delta"]["content"], "Hel");
  EXPECT_EQ(nlohmann::json::parse(events[2])["choices"][0]["delta"]["content"], "lo");
  const auto last = nlohmann::json::parse(events[3]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last["usage"].is_null());
  const auto usage = nlohmann::json::parse(events[4]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[5], "[DONE]");
}

// Three samples streamed as choices 0..2, interleaved; each gets its own finish chunk; usage counts the
// prompt once and every sample's tokens; the body ends only when the last sample has.
TEST(ResponsePump, SamplesStreamAsChoicesWithTheirIndex) {
  PumpOptions o = options(true, true);
  o.num_samples = o.num_choices = 3;
  Harness h(Endpoint::kChatCompletions, o);
  h.stream->push(sample_output(1, "b"));
  h.stream->push(sample_output(0, "a", true, 1));
  h.stream->push(sample_output(2, "c", true, 4));
  std::string body = h.run(3);
  EXPECT_EQ(body.find("[DONE]"), std::string::npos) << "sample 1 is still running";
  h.stream->push(sample_output(1, "", true, 2, 0.0, FinishReason::kEos));
  body += h.run();
  const auto events = SseParser().feed(body);
  std::vector<std::string> text(3), reasons(3);
  size_t roles = 0;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const auto chunk = nlohmann::json::parse(events[i]);
    ASSERT_EQ(chunk["choices"].size(), 1u);
    const auto& choice = chunk["choices"][0];
    const size_t index = choice["index"].get<size_t>();
    ASSERT_LT(index, 3u);
    roles += choice["delta"].contains("role");
    text[index] += choice["delta"].value("content", "");
    if (!choice["finish_reason"].is_null()) reasons[index] = choice["finish_reason"];
  }
  EXPECT_EQ(roles, 3u) << "each choice opens with the assistant role";
  EXPECT_EQ(text, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(reasons, (std::vector<std::string>{"length", "stop", "length"}));
  const auto usage = nlohmann::json::parse(events[events.size() - 2]);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(usage["usage"]["completion_tokens"], 1 + 2 + 4);
  EXPECT_EQ(events.back(), "[DONE]");
  h.pump.reset();
  EXPECT_EQ(h.closed_finished, 1);
}

// best_of 3, n 2: the two samples with the highest log-probability per drawn token, best first (an
// EOS is drawn though it is no completion token).
TEST(ResponsePump, BestOfReturnsTheSamplesMostLikelyPerToken) {
  PumpOptions o = options(false, false, "Q:");
  o.num_samples = 3;
  o.num_choices = 2;
  Harness h(Endpoint::kCompletions, o);
  h.stream->push(sample_output(0, "low", true, 2, -4.0));                      // -2 per token
  h.stream->push(sample_output(1, "high", true, 4, -4.0));                     // -1
  h.stream->push(sample_output(2, "mid", true, 2, -4.5, FinishReason::kEos));  // -1.5 over 3 draws
  const auto body = nlohmann::json::parse(h.run());
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], "Q:high");
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["text"], "Q:mid");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["completion_tokens"], 2 + 4 + 2) << "every sample generated is counted";
}

// A sample still running when the pump goes (client gone) means the request must be cancelled.
TEST(ResponsePump, AnUnfinishedSampleCancelsTheRequest) {
  PumpOptions o = options(false);
  o.num_samples = o.num_choices = 2;
  Harness h(Endpoint::kCompletions, o);
  h.stream->push(sample_output(0, "a", true));
  h.run(2);
  h.pump.reset();
  EXPECT_EQ(h.closed_finished, 0);
}

TEST(ResponsePump, EngineErrorEndsTheStreamWithAnErrorEvent) {
  Harness h(Endpoint::kCompletions, options(true));
  RequestOutput failed = output("", true);
  failed.error = Status::out_of_memory("no KV blocks left");
  h.stream->push(failed);
  const auto events = SseParser().feed(h.run());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(events[0])["error"]["message"], "no KV blocks left");
  EXPECT_EQ(events[1], "[DONE]");
}

TEST(ResponsePump, ClientGoneAndDestroyedEarlyCancels) {
  Harness h(Endpoint::kCompletions, options(true));
  h.stream->push(output("a"));
  EXPECT_EQ(h.pump->pump([](std::string_view) { return false; }), ResponsePump::Progress::kClientGone);
  h.pump.reset();
  EXPECT_EQ(h.closed_finished, 0);  // unfinished: the owner cancels
}

TEST(ResponsePump, HeartbeatWhileWaiting) {
  Harness stream(Endpoint::kCompletions, options(true, false, "", 0ms));
  EXPECT_EQ(stream.run(1), ": keep-alive\n\n");
  Harness whole(Endpoint::kCompletions, options(false, false, "", 0ms));
  EXPECT_EQ(whole.run(1), " ");  // leading whitespace keeps the JSON valid
}

TEST(SseParser, SplitsEventsAcrossReads) {
  SseParser parser;
  EXPECT_TRUE(parser.feed("data: {\"a\"").empty());
  EXPECT_EQ(parser.feed(":1}\n\n: comment\n\ndata: [DONE]\r\n\r\n"), (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
  EXPECT_EQ(parser.feed("data: x\ndata: y\n\n"), std::vector<std::string>{"x\ny"});
}

}  // namespace
}  // namespace kvs::server
