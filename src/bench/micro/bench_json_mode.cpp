// What JSON mode and structured outputs add to a decode step: one mask of the whole vocabulary
// (grammar/json_constraint.h) in the states a JSON document (Mask) or an instance of bench/person_schema.json
// (SchemaMask) passes through, on the 110M-shaped model's 32,000-token vocabulary (bench/model_110m.sh writes it;
// KVS_BENCH_MODEL names another GGUF). bench/json_mode.sh sets these times against the model's decode step.
// Run on an idle machine:  build/bench_json_mode --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/json_vocabulary.h"
#include "gguf/gguf.h"

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

std::shared_ptr<const JsonSchema> person_schema() {
  static const std::shared_ptr<const JsonSchema> schema = [] {
    std::ifstream in(std::string(KVS_SOURCE_DIR) + "/bench/person_schema.json");
    std::ostringstream text;
    text << in.rdbuf();
    auto compiled = JsonSchema::compile(text.str());
    if (!compiled) throw std::runtime_error(compiled.status().message());
    return *compiled;
  }();
  return schema;
}

// One mask of every logit after `prefix` (fed through the vocabulary's one-byte tokens), with a budget that does
// not bind.
void time_masks(benchmark::State& state, JsonConstraint constraint, const std::string& prefix) {
  const auto index = vocabulary();
  std::vector<float> logits(index->vocab_size(), 0.0f);
  std::vector<float> work(logits.size());
  for (char c : prefix) {
    bool fed = false;
    for (size_t t = 0; t < index->vocab_size() && !fed; ++t) {
      if (index->bytes(static_cast<TokenId>(t)) == std::string(1, c)) {
        work = logits;
        if (!constraint.mask(work) || work[t] != 0.0f) {
          state.SkipWithError("the prefix leaves the grammar");
          return;
        }
        constraint.accept(static_cast<TokenId>(t));
        fed = true;
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

// The mean mask over a whole document: every state it passes through, one byte (a one-byte token) at a time.
void time_masks_along(benchmark::State& state, const JsonConstraint& start, const std::string& document) {
  const auto index = vocabulary();
  std::vector<TokenId> byte_token(256, -1);
  for (size_t t = 0; t < index->vocab_size(); ++t) {
    const std::string& b = index->bytes(static_cast<TokenId>(t));
    if (b.size() == 1 && byte_token[static_cast<uint8_t>(b[0])] < 0) byte_token[static_cast<uint8_t>(b[0])] = t;
  }
  std::vector<float> logits(index->vocab_size(), 0.0f);
  for (auto _ : state) {
    JsonConstraint constraint = start;
    for (char c : document) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      constraint.mask(logits, std::numeric_limits<size_t>::max() / 2);
      const TokenId t = byte_token[static_cast<uint8_t>(c)];
      if (t < 0 || logits[static_cast<size_t>(t)] != 0.0f) {
        state.SkipWithError("the document leaves the grammar");
        return;
      }
      constraint.accept(t);
    }
  }
  state.counters["per_mask"] = benchmark::Counter(static_cast<double>(state.iterations() * document.size()),
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// An instance of bench/person_schema.json as the random 110M model writes one (whitespace runs between the parts).
const std::string kPersonDocument =
    "  \n\t\n {\n\t\"name\" \t: \t\r\"ayl atcdeu lfq lct jiz agsrqi gqcgyzhcwx\"\t\t \r\t ,\r \"age\"\n\t:6,"
    "\"pets\":[\"cat\" , \"dog\"],\"home\": {\"city\" : \"Oslo\", \"floor\":null} ,\"bio\":\"likes\\n \\\"tea\\\"\","
    "\"vegan\"\t: true }";

void SchemaDocument(benchmark::State& state) {
  time_masks_along(state, JsonConstraint(vocabulary(), person_schema()), kPersonDocument);
}
BENCHMARK(SchemaDocument);

void JsonDocument(benchmark::State& state) { time_masks_along(state, JsonConstraint(vocabulary()), kPersonDocument); }
BENCHMARK(JsonDocument);

void Mask(benchmark::State& state, const std::string& prefix) {
  time_masks(state, JsonConstraint(vocabulary()), prefix);
}

void SchemaMask(benchmark::State& state, const std::string& prefix) {
  time_masks(state, JsonConstraint(vocabulary(), person_schema()), prefix);
}

BENCHMARK_CAPTURE(Mask, start, std::string(""));
BENCHMARK_CAPTURE(Mask, in_key, std::string("{\"ab"));
BENCHMARK_CAPTURE(Mask, after_key, std::string("{\"a\""));
BENCHMARK_CAPTURE(Mask, value, std::string("{\"a\":"));
BENCHMARK_CAPTURE(Mask, in_string_value, std::string("{\"a\":\"hello"));
BENCHMARK_CAPTURE(Mask, in_number, std::string("{\"a\":12"));
BENCHMARK_CAPTURE(Mask, after_value, std::string("{\"a\":[1,{\"b\":true}"));
BENCHMARK_CAPTURE(SchemaMask, start, std::string(""));
BENCHMARK_CAPTURE(SchemaMask, key, std::string("{"));
BENCHMARK_CAPTURE(SchemaMask, in_key, std::string("{\"na"));
BENCHMARK_CAPTURE(SchemaMask, in_string_value, std::string("{\"name\":\"Ann"));
BENCHMARK_CAPTURE(SchemaMask, in_integer, std::string("{\"name\":\"Ann\",\"age\":4"));
BENCHMARK_CAPTURE(SchemaMask, enum_item, std::string("{\"name\":\"Ann\",\"age\":4,\"pets\":["));
BENCHMARK_CAPTURE(SchemaMask, any_of, std::string("{\"name\":\"Ann\",\"age\":4,\"pets\":[\"cat\"],\"home\":"));
BENCHMARK_CAPTURE(SchemaMask, nested_key, std::string("{\"name\":\"Ann\",\"age\":4,\"pets\":[\"cat\"],\"home\":{"));

}  // namespace
}  // namespace kvs

BENCHMARK_MAIN();
