// The benchmark's timed runs go through the engine: a timed token is the time from one token to the next,
// however many engine steps it takes (the no-cache baseline recomputes its history in chunks).
#include <gtest/gtest.h>

#include "bench/bench_measure.h"
#include "model/decoder_model.h"
#include "test_support.h"

namespace kvs {
namespace {

TEST(TimedRun, ATimedTokenMayTakeSeveralEngineSteps) {
  auto model = DecoderModel::load(test::default_model_path());
  ASSERT_TRUE(model) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  ASSERT_TRUE(tokenizer);
  ThreadPool pool(1);
  // A batch budget of 8 tokens: recomputing a history of 21+ tokens takes at least 3 engine steps.
  auto engine = Engine::create(**model, *tokenizer, pool, {.max_batch_tokens = 8, .max_seqs = 1});
  ASSERT_TRUE(engine) << engine.status().message();
  double clock = 0.0;
  const BenchClock now = [&] { return clock += 1.0; };  // every reading is one second later
  const std::vector<TokenId> prompt(20, 300);
  for (bool recompute : {false, true}) {
    auto run = timed_run(**engine, prompt, 1, 3, now, recompute);
    ASSERT_TRUE(run) << run.status().message();
    EXPECT_EQ(run->step_seconds.size(), 3u);
    EXPECT_GT(run->prefill_seconds, 0.0);
    EXPECT_FALSE((*engine)->has_work());
    EXPECT_EQ((*engine)->kv().usage().blocks_used, 0u);
  }
}

}  // namespace
}  // namespace kvs
