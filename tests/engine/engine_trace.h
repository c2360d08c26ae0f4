// One request through the engine (the path every command runs), recording every logits row: the
// model-level tests compare layouts, element types and weight packings through it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "model/decoder_model.h"

namespace kvs::test {

// A model file loaded with its tokenizer (the test fails, and the pointers are empty, when either fails).
struct LoadedModel {
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline LoadedModel load_model(const std::string& path) {
  auto model = DecoderModel::load(path);
  EXPECT_TRUE(model) << model.status().message();
  if (!model) return {};
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  EXPECT_TRUE(tokenizer) << tokenizer.status().message();
  if (!tokenizer) return {};
  return {std::move(model).value(), std::make_unique<Tokenizer>(std::move(tokenizer).value())};
}

struct EngineTrace {
  std::vector<TokenId> tokens;                  // generated
  std::map<size_t, std::vector<float>> logits;  // position -> logits after the token at that position
  GenerationResult result;
};

// `params` (greedy unless it says otherwise) on a fresh engine of `config` over `model`; with
// params.all_logits every prompt position's logits are recorded too.
inline EngineTrace trace_request(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                 const EngineConfig& config, RequestParams params) {
  EngineTrace trace;
  auto engine = Engine::create(model, tokenizer, pool, config);
  EXPECT_TRUE(engine) << engine.status().message();
  if (!engine) return trace;
  params.on_logits = [&](size_t position, std::span<const float> logits) {
    trace.logits[position].assign(logits.begin(), logits.end());
  };
  auto result = generate(**engine, std::move(params));
  EXPECT_TRUE(result) << result.status().message();
  if (!result) return trace;
  trace.tokens = result->tokens;
  trace.result = *result;
  EXPECT_EQ((*engine)->kv().usage().blocks_used, 0u) << "blocks not returned";
  return trace;
}

// One engine kept across requests (its caches persist); each run is traced like trace_request, then the
// KV manager's invariants (and its offload tiers', when it has them) are checked.
class EngineSession {
 public:
  EngineSession(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, const EngineConfig& config) {
    auto e = Engine::create(model, tokenizer, pool, config);
    EXPECT_TRUE(e) << e.status().message();
    if (e) engine_ = std::move(e).value();
  }
  EngineTrace run(RequestParams params) {
    EngineTrace trace;
    params.on_logits = [&](size_t position, std::span<const float> logits) {
      trace.logits[position].assign(logits.begin(), logits.end());
    };
    auto result = generate(*engine_, std::move(params));
    EXPECT_TRUE(result) << result.status().message();
    if (!result) return trace;
    trace.tokens = result->tokens;
    trace.result = *result;
    check();
    return trace;
  }
  void check() const {
    const Status kv = engine_->kv().check_invariants();
    EXPECT_TRUE(kv.is_ok()) << kv.message();
    if (engine_->kv_tiers() == nullptr) return;
    const Status tiers = engine_->kv_tiers()->check_invariants();
    EXPECT_TRUE(tiers.is_ok()) << tiers.message();
  }
  Engine& engine() { return *engine_; }
  void close() { engine_.reset(); }  // as a server stops: what the engine does as it closes is done

 private:
  std::unique_ptr<Engine> engine_;
};

// BOS and then n - 1 ids of a synthetic vocabulary's words (260..509), varied by `salt`.
inline std::vector<TokenId> varied_prompt(size_t n, size_t salt = 0) {
  std::vector<TokenId> p{1};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<TokenId>(260 + (i * 37 + salt * 11) % 250));
  return p;
}

inline RequestParams greedy_request(std::vector<TokenId> prompt, size_t new_tokens, bool all_logits = true) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_new_tokens = new_tokens;
  p.sampling.temperature = 0.0f;
  p.stop_at_eos = false;
  p.all_logits = all_logits;
  return p;
}

// Largest |a - b| over the logits rows both traces hold (their positions must agree).
inline float worst_logit_difference(const EngineTrace& a, const EngineTrace& b) {
  EXPECT_EQ(a.logits.size(), b.logits.size());
  float worst = 0.0f;
  for (const auto& [position, row] : a.logits) {
    auto it = b.logits.find(position);
    EXPECT_NE(it, b.logits.end()) << "position " << position;
    if (it == b.logits.end()) continue;
    for (size_t i = 0; i < row.size(); ++i) worst = std::max(worst, std::fabs(row[i] - it->second[i]));
  }
  return worst;
}

// A run that took part of its prompt from a cache computes fewer logits rows than the reference: same
// generated tokens, every row it computed within `bound` of the reference's row at that position, and
// the last prompt token's row always computed.
inline void expect_cached_run_matches(const EngineTrace& cached, const EngineTrace& ref, float bound) {
  EXPECT_EQ(cached.tokens, ref.tokens);
  float worst = 0.0f;
  for (const auto& [position, row] : cached.logits) {
    const auto it = ref.logits.find(position);
    ASSERT_NE(it, ref.logits.end()) << "position " << position;
    for (size_t i = 0; i < row.size(); ++i) worst = std::max(worst, std::fabs(row[i] - it->second[i]));
  }
  EXPECT_LE(worst, bound);
  if (cached.result.prompt_tokens > 0 && !ref.logits.empty()) {
    EXPECT_TRUE(cached.logits.count(cached.result.prompt_tokens - 1)) << "the last prompt token is always computed";
  }
}

}  // namespace kvs::test
