#include "cli/bench_gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "bench/bench_measure.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "gpu/gpu_model.h"
#include "kv/kv_sizing.h"

namespace kvs::cli {
namespace {

constexpr uint64_t kProbeBytes = uint64_t{1} << 30;  // B*'s buffer: 1 GiB where one binding and the memory allow
constexpr uint64_t kTokenSeed = 41;

struct DecodeRow {
  size_t depth = 0;
  double tok_s = 0.0;          // the best repetition's tokens / time
  double bytes_per_token = 0;  // what one decode token reads: every matrix but the embedding, and the cache
  double share = 0.0;          // bytes_per_token x tok_s / B*
};

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void run_gpu_bench(const GpuBenchOptions& o) {
  if (o.depths.empty() || o.decode_tokens == 0 || o.prefill_tokens == 0) {
    throw CommandError("bench --device: --kv-depths, --kv-tokens and the prompt need at least one token");
  }
  LoadedModel loaded =
      load_model({.model_path = o.model_path, .threads = o.threads, .device = o.device, .profile = o.profile});
  const Model& model = *loaded.gpu;
  const ModelConfig& c = model.config();
  const size_t deepest = *std::max_element(o.depths.begin(), o.depths.end());
  const size_t prefill_tokens = std::min(o.prefill_tokens, c.context_length / 2);  // room for its sampled tokens
  const size_t capacity = std::max(prefill_tokens + 1, deepest + o.decode_tokens + 1);
  if (deepest + o.decode_tokens + 1 > c.context_length) {
    throw CommandError(fmt::format("bench --device: depth {} + {} tokens exceeds the model's context of {}", deepest,
                                   o.decode_tokens, c.context_length));
  }
  EngineConfig config{.max_batch_tokens = prefill_tokens,
                      .max_seqs = 1,
                      .kv = {.block_size = 16, .dtype = KvDType::kF16, .prefix_caching = false}};
  config.kv.blocks = kv_blocks_for_tokens(capacity, config.kv.block_size);
  auto engine = Engine::create(model, *loaded.tokenizer, *loaded.pool, config);
  if (!engine) throw CommandError(engine.status().message());
  print_gpu_memory_line(loaded, **engine, config);
  auto report = gpu_memory_report(model, engine_kv_spec(model, config), config.max_batch_tokens);
  if (!report) throw CommandError(report.status().message());

  auto probe = gpu_stream_bandwidth(model, kProbeBytes, o.reps + 2);
  if (!probe) throw CommandError(probe.status().message());
  const double b_star = probe->bytes_per_second();
  const std::vector<TokenId> tokens = bench_tokens(capacity, c.vocab_size, kTokenSeed);

  double prefill_best = 0.0;
  for (size_t r = 0; r < o.reps + 1; ++r) {  // the first is a warm-up (pipelines, buffers)
    auto run = timed_run(**engine, std::span(tokens).first(prefill_tokens), 0, 1, seconds_now);
    if (!run) throw CommandError(run.status().message());
    if (r > 0) prefill_best = std::max(prefill_best, prefill_tokens / run->prefill_seconds);
  }
  // What a decode step reads of the weights: every matrix and the classifier, not the embedding (one row a token),
  // unless the classifier is the embedding (uploaded once).
  const WeightView& embedding = loaded.model->weights().token_embedding;
  const double matrix_bytes = static_cast<double>(report->weight_bytes) -
                              (c.tied_output ? 0.0 : static_cast<double>(embedding.rows * embedding.row_bytes()));
  const KvCacheSpec spec = engine_kv_spec(model, config);
  const double kv_per_token = static_cast<double>(kv_bytes_per_block(spec).total()) / spec.block_size;
  std::vector<DecodeRow> rows;
  for (size_t depth : o.depths) {
    DecodeRow row{.depth = depth};
    for (size_t r = 0; r < o.reps; ++r) {
      auto rates = decode_at_depth(**engine, tokens, depth, tokens[depth], o.decode_tokens, seconds_now);
      if (!rates) throw CommandError(rates.status().message());
      row.tok_s = std::max(row.tok_s, rates->tok_s);
    }
    // The mean depth over the timed tokens: depth .. depth + tokens - 1 cached slots.
    row.bytes_per_token = matrix_bytes + kv_per_token * (static_cast<double>(depth) + (o.decode_tokens - 1) / 2.0);
    row.share = b_star > 0 ? row.bytes_per_token * row.tok_s / b_star : 0.0;
    rows.push_back(row);
  }

  std::string table = fmt::format(
      "## kvserve bench on {}\n\nModel {} ({} layers, dim {}, {} heads / {} KV heads), weights {:.1f} MiB, f16 K/V, "
      "{} threads on the host.\nB* (stream probe, {:.0f} MiB, best of {}): {:.1f} GB/s.\n\n",
      report->device, o.model_path, c.num_layers, c.dim, c.num_heads, c.num_kv_heads, report->weight_bytes / 1048576.0,
      loaded.pool->num_threads(), probe->bytes / 1048576.0, o.reps + 2, b_star / 1e9);
  table += fmt::format("| measure | tok/s | bytes a token | share of B* |\n|---|---:|---:|---:|\n");
  table += fmt::format("| prefill, {} tokens | {:.1f} | | |\n", prefill_tokens, prefill_best);
  for (const DecodeRow& r : rows) {
    table += fmt::format("| decode at depth {} | {:.1f} | {:.1f} MB | {:.1f}% |\n", r.depth, r.tok_s,
                         r.bytes_per_token / 1e6, 100.0 * r.share);
  }
  fmt::print("{}\n", table);
  std::fflush(stdout);
  print_gpu_profile(loaded);
  if (!o.json_path.empty()) {
    nlohmann::json j{{"device", report->device},
                     {"model", o.model_path},
                     {"weight_bytes", report->weight_bytes},
                     {"kv_dtype", "f16"},
                     {"probe", {{"bytes", probe->bytes}, {"seconds", probe->seconds}, {"bytes_per_second", b_star}}},
                     {"prefill", {{"tokens", prefill_tokens}, {"tok_s", prefill_best}}}};
    for (const DecodeRow& r : rows) {
      j["decode"].push_back({{"depth", r.depth},
                             {"tokens", o.decode_tokens},
                             {"tok_s", r.tok_s},
                             {"bytes_per_token", r.bytes_per_token},
                             {"share_of_b_star", r.share}});
    }
    uint64_t steps = 0;
    for (const GpuKernelTime& k : gpu_profile(model, &steps)) {
      j["profile"].push_back({{"kind", k.kind}, {"seconds", k.seconds}, {"dispatches", k.dispatches}});
    }
    write_text_file(o.json_path, j.dump(2) + "\n");
  }
}

}  // namespace kvs::cli
