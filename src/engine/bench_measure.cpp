#include "engine/bench_measure.h"

#include <algorithm>

#include "kv/kv_sizing.h"

namespace kvs {

BenchModelInfo describe_model(const LlamaModel& model, const std::string& path) {
  const ModelConfig& c = model.config();
  const LlamaWeights& w = model.weights();
  BenchModelInfo info{.path = path,
                      .weight_type = std::string(dtype_name(w.layers.empty() ? w.output.type : w.layers[0].wq.type)),
                      .weight_layout = w.has_packed_matrices() ? "q8_0x16" : "gguf",
                      .layers = c.num_layers,
                      .dim = c.dim,
                      .heads = c.num_heads,
                      .kv_heads = c.num_kv_heads,
                      .head_dim = c.head_dim,
                      .ffn = c.ffn_dim,
                      .vocab = c.vocab_size,
                      .context = c.context_length,
                      .matrix_bytes = w.matrix_bytes(),
                      .output_params = w.output.rows * w.output.cols};
  for (const LayerWeights& l : w.layers) {
    for (const WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      info.layer_params += m->rows * m->cols;
    }
  }
  const KvCacheSpec spec{
      .num_layers = c.num_layers, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim, .block_size = 1};
  info.kv_bytes_per_token = kv_bytes_per_block(spec).total();
  return info;
}

std::vector<TokenId> bench_tokens(size_t n, size_t vocab, uint64_t seed) {
  constexpr size_t kFirst = 3;  // past the special tokens
  const uint64_t range = vocab > kFirst ? vocab - kFirst : 1;
  uint64_t state = seed;
  std::vector<TokenId> tokens(n);
  for (TokenId& t : tokens) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    t = static_cast<TokenId>(std::min<uint64_t>(kFirst + z % range, vocab - 1));
  }
  return tokens;
}

Expected<std::vector<double>> timed_decode(SequenceRunner& runner, TokenId first, size_t n, const BenchClock& now) {
  TokenId next = first;
  std::vector<double> seconds;
  for (size_t i = 0; i < n; ++i) {
    const double start = now();
    auto logits = runner.append({&next, 1});
    seconds.push_back(now() - start);
    if (!logits) return logits.status();
    next = static_cast<TokenId>(std::max_element(logits->begin(), logits->end()) - logits->begin());
  }
  return seconds;
}

size_t bench_step_count(const BenchPlan& p, bool extra_prefill) {
  const size_t prefill = 1 + p.reps * p.prefill_tokens.size();  // warm-up + runs
  const size_t peak_probes = 2;
  const size_t decode = 2 + p.decode_depths.size() * p.reps * 2 + 1;  // two fills, A/B runs, last probe
  const size_t cache = p.cache_contexts.size() * p.reps * 2;
  const size_t paging = 1;
  return peak_probes + prefill * (extra_prefill ? 2 : 1) + decode + cache + paging;
}

}  // namespace kvs
