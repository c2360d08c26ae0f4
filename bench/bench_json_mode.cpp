// What JSON mode adds to a decode step: one mask of the whole vocabulary (grammar/json_constraint.h) in the states
// a JSON document passes through, on the 110M-shaped model's 32,000-token vocabulary (bench/model_110m.sh writes
// it; KVS_BENCH_MODEL names another GGUF). bench/json_mode.sh sets these times against the model's decode step.
// Run on an idle machine:  build/bench_json_mode --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/json_vocabulary.h"
#include "model/gguf.h"

namespace kvs {
namespace {

std::shared_ptr<const JsonTokenIndex> vocabulary() {
  static const std::shared_ptr<const JsonTokenIndex> index = [] {
    const char* env = std::getenv("KVS_BENCH_MODEL");
    const std::string path = env ? env : "/tmp/kvserve-bench/110m-q8.gguf";
    auto file = gguf::File::open(path);
    if (!file) throw std::runtime_error(file.status().message());
    auto tokenizer = Tokenizer::from_gguf(*file);
    if (!tokenizer) throw std::runtime_error(tokenizer.status().message());
    return json_token_index(*tokenizer);
  }();
  return index;
}

// One mask of every logit after the document `prefix`, with a budget that does not bind.
void Mask(benchmark::State& state, const std::string& prefix) {
  const auto index = vocabulary();
  std::vector<float> logits(index->vocab_size(), 0.0f);
  std::vector<float> work(logits.size());
  JsonConstraint constraint(index);
  JsonMachine check;
  if (!check.feed(prefix)) state.SkipWithError("not a JSON prefix");
  for (char c : prefix) {
    // Feed the prefix byte by byte through one-byte tokens of the vocabulary: find a token that is exactly c.
    for (size_t t = 0; t < index->vocab_size(); ++t) {
      if (index->bytes(static_cast<TokenId>(t)) == std::string(1, c)) {
        constraint.accept(static_cast<TokenId>(t));
        break;
      }
    }
  }
  size_t allowed = 0;
  for (auto _ : state) {
    work = logits;
    constraint.mask(work, std::numeric_limits<size_t>::max() / 2);
    benchmark::DoNotOptimize(work.data());
  }
  for (float l : work) allowed += l == 0.0f;
  state.counters["allowed"] = static_cast<double>(allowed);
}

BENCHMARK_CAPTURE(Mask, start, std::string(""));
BENCHMARK_CAPTURE(Mask, in_key, std::string("{\"ab"));
BENCHMARK_CAPTURE(Mask, after_key, std::string("{\"a\""));
BENCHMARK_CAPTURE(Mask, value, std::string("{\"a\":"));
BENCHMARK_CAPTURE(Mask, in_string_value, std::string("{\"a\":\"hello"));
BENCHMARK_CAPTURE(Mask, in_number, std::string("{\"a\":12"));
BENCHMARK_CAPTURE(Mask, after_value, std::string("{\"a\":[1,{\"b\":true}"));

}  // namespace
}  // namespace kvs

BENCHMARK_MAIN();
