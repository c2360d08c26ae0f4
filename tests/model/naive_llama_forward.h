// A deliberately plain llama forward pass over a GGUF file (llama2.c style, fp32, one token at a
// time), used by the converter and synth tests to check that the files they write compute what they
// should. Not the engine's forward pass: it exists so these tests do not depend on it. It reads the Llama
// family as llama.cpp does: "llama" (interleaved RoPE pairs), "qwen2" (RoPE on halves), Q/K/V biases when the
// file has them, a sliding window on every layer, linear RoPE scaling and Llama 3.1's rope_freqs factors
// (pair j's angle divided by factor j).
//
// With an eviction rule (NaiveEviction: kv/policies/kv_policy.h written out again) it is also the
// reference of the eviction policies: each layer and KV head keeps a list of entries (the key before
// RoPE, the value, the attention mass received); when a list holds the budget and a token comes, the rule
// keeps `keep` entries; entry i is rotated at position i when read (positions within the cache), where
// the engine re-rotates keys when they move.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/convert.h"

namespace kvs::testing {

struct NaiveEviction {
  enum class Kind { kNone, kWindow, kSinks, kHeavyHitters } kind = Kind::kNone;
  size_t budget = 0, keep = 0;  // evict when an entry list holds `budget`, down to `keep`
  size_t sinks = 0, recent = 0;
  bool pooled = false;     // heavy hitters ranked by the mass summed over every layer and head
  bool per_query = false;  // heavy hitters ranked by mass / (tokens computed - the entry's position)
};

class NaiveLlama {
 public:
  // Entry lists to keep, by index, ascending: [layer * kv_heads + head] (one list when every row keeps the same).
  using KeptSets = std::vector<std::vector<size_t>>;
  // window > 0: every layer attends to the last `window` positions only (a forced sliding window).
  explicit NaiveLlama(const gguf::File& f, size_t window = 0, NaiveEviction eviction = {})
      : window_(window), eviction_(eviction) {
    const std::string arch = f.get_string("general.architecture").value_or("llama") + ".";
    dim_ = static_cast<size_t>(*f.get_int(arch + "embedding_length"));
    layers_ = static_cast<size_t>(*f.get_int(arch + "block_count"));
    heads_ = static_cast<size_t>(*f.get_int(arch + "attention.head_count"));
    kv_heads_ = static_cast<size_t>(*f.get_int(arch + "attention.head_count_kv"));
    eps_ = static_cast<float>(*f.get_float(arch + "attention.layer_norm_rms_epsilon"));
    rope_base_ = static_cast<float>(f.get_float(arch + "rope.freq_base").value_or(10000.0));
    neox_ = arch == "qwen2.";
    if (f.get_string(arch + "rope.scaling.type").value_or("none") == "linear") {
      rope_scale_ = static_cast<float>(1.0 / *f.get_float(arch + "rope.scaling.factor"));
    }
    if (window_ == 0) window_ = static_cast<size_t>(f.get_int(arch + "attention.sliding_window").value_or(0));
    for (const auto& t : f.tensors()) {
      std::vector<float> values(t.num_elements());
      const size_t cols = t.dims[0], row_bytes = dtype_row_bytes(t.type, cols);
      for (size_t r = 0; r < values.size() / cols; ++r) {
        dequantize_row(t.type, t.data.data() + r * row_bytes, values.data() + r * cols, cols);
      }
      weights_[t.name] = std::move(values);
    }
    vocab_ = f.find_tensor("token_embd.weight")->dims[1];
    if (const auto it = weights_.find("rope_freqs.weight"); it != weights_.end()) rope_factors_ = it->second;
    cache_.assign(layers_ * kv_heads_, {});
  }

  size_t vocab() const { return vocab_; }
  // Called with the rule's kept sets at each eviction; it may replace them (a test adopting the engine's choice
  // between scores that tie within rounding).
  std::function<void(KeptSets&)> on_evict;
  size_t num_rows() const { return cache_.size(); }  // layers x KV heads
  // The attention mass each entry of row r has received (per query that could see it, under per_query), when
  // `computed` tokens have been.
  std::vector<double> masses(size_t r, size_t computed) const {
    std::vector<double> out;
    for (const Entry& e : cache_[r])
      out.push_back(eviction_.per_query ? e.mass / static_cast<double>(computed - e.position) : e.mass);
    return out;
  }

  // Logits after feeding `token` at the next position.
  std::vector<float> step(int token) {
    const size_t hd = dim_ / heads_, kv_dim = hd * kv_heads_, pos = pos_++;
    const bool evicts = eviction_.kind != NaiveEviction::Kind::kNone;
    if (evicts && cache_[0].size() == eviction_.budget) evict(pos);
    const size_t rope_pos = evicts ? cache_[0].size() : pos;  // the query's position
    std::vector<float> x(w("token_embd.weight").begin() + static_cast<ptrdiff_t>(token * dim_),
                         w("token_embd.weight").begin() + static_cast<ptrdiff_t>((token + 1) * dim_));
    for (size_t l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      std::vector<float> xb = rmsnorm(x, w(p + "attn_norm.weight"));
      std::vector<float> q = matvec(w(p + "attn_q.weight"), xb, dim_);
      std::vector<float> k = matvec(w(p + "attn_k.weight"), xb, kv_dim);
      std::vector<float> v = matvec(w(p + "attn_v.weight"), xb, kv_dim);
      add_if_present(q, p + "attn_q.bias");
      add_if_present(k, p + "attn_k.bias");
      add_if_present(v, p + "attn_v.bias");
      rope(q, rope_pos, hd);
      for (size_t g = 0; g < kv_heads_; ++g) {
        cache_[l * kv_heads_ + g].push_back({.key = {k.begin() + g * hd, k.begin() + (g + 1) * hd},
                                             .value = {v.begin() + g * hd, v.begin() + (g + 1) * hd},
                                             .position = pos});
      }
      std::vector<float> attn(dim_, 0.0f);
      for (size_t h = 0; h < heads_; ++h) {
        const size_t kvh = h / (heads_ / kv_heads_);
        std::vector<Entry>& entries = cache_[l * kv_heads_ + kvh];
        const size_t first_pos = window_ > 0 && pos + 1 > window_ ? pos + 1 - window_ : 0;
        std::vector<size_t> seen;  // entries inside the window
        for (size_t e = 0; e < entries.size(); ++e)
          if (entries[e].position >= first_pos) seen.push_back(e);
        std::vector<float> scores(seen.size());
        for (size_t j = 0; j < seen.size(); ++j) {
          std::vector<float> key = entries[seen[j]].key;  // rotated on read, at its position
          rope(key, evicts ? seen[j] : entries[seen[j]].position, hd);
          float s = 0.0f;
          for (size_t i = 0; i < hd; ++i) s += q[h * hd + i] * key[i];
          scores[j] = s / std::sqrt(static_cast<float>(hd));
        }
        softmax(scores);
        for (size_t j = 0; j < seen.size(); ++j) {
          Entry& e = entries[seen[j]];
          e.mass += scores[j];
          for (size_t i = 0; i < hd; ++i) attn[h * hd + i] += scores[j] * e.value[i];
        }
      }
      add(x, matvec(w(p + "attn_output.weight"), attn, dim_));
      xb = rmsnorm(x, w(p + "ffn_norm.weight"));
      std::vector<float> gate = matvec(w(p + "ffn_gate.weight"), xb, 0);
      const std::vector<float> up = matvec(w(p + "ffn_up.weight"), xb, gate.size());
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      add(x, matvec(w(p + "ffn_down.weight"), gate, dim_));
    }
    x = rmsnorm(x, w("output_norm.weight"));
    const auto out = weights_.find("output.weight");
    return matvec(out != weights_.end() ? out->second : w("token_embd.weight"), x, vocab_);
  }

 private:
  struct Entry {
    std::vector<float> key;  // before RoPE
    std::vector<float> value;
    size_t position = 0;  // in the sequence
    double mass = 0.0;    // attention received, summed over query heads and steps
  };

  // The rule: sinks first, the most recent, and between them the highest mass (ties: the older entry).
  std::vector<size_t> kept_by_rule(const std::vector<double>& mass) const {
    const NaiveEviction& r = eviction_;
    const size_t n = mass.size(), keep = std::min(r.keep, n);
    std::vector<size_t> kept;
    if (r.kind == NaiveEviction::Kind::kWindow) {
      for (size_t i = n - keep; i < n; ++i) kept.push_back(i);
      return kept;
    }
    const size_t sinks = std::min(r.sinks, keep);
    const size_t recent = r.kind == NaiveEviction::Kind::kSinks ? keep - sinks : std::min(r.recent, keep - sinks);
    std::vector<size_t> middle;
    for (size_t i = sinks; i < n - recent; ++i) middle.push_back(i);
    std::stable_sort(middle.begin(), middle.end(), [&](size_t a, size_t b) { return mass[a] > mass[b]; });
    middle.resize(keep - sinks - recent);
    for (size_t i = 0; i < sinks; ++i) kept.push_back(i);
    kept.insert(kept.end(), middle.begin(), middle.end());
    for (size_t i = n - recent; i < n; ++i) kept.push_back(i);
    std::sort(kept.begin(), kept.end());
    return kept;
  }

  void evict(size_t computed) {
    const bool per_head = eviction_.kind == NaiveEviction::Kind::kHeavyHitters && !eviction_.pooled;
    KeptSets kept;
    if (per_head) {
      for (size_t r = 0; r < cache_.size(); ++r) kept.push_back(kept_by_rule(masses(r, computed)));
    } else {
      std::vector<double> pooled(cache_[0].size(), 0.0);
      for (size_t r = 0; r < cache_.size(); ++r) {
        const std::vector<double> m = masses(r, computed);
        for (size_t i = 0; i < pooled.size(); ++i) pooled[i] += m[i];
      }
      kept.push_back(kept_by_rule(pooled));
    }
    if (on_evict) on_evict(kept);
    for (size_t r = 0; r < cache_.size(); ++r) {
      std::vector<Entry> left;
      for (size_t i : kept[kept.size() == 1 ? 0 : r]) left.push_back(cache_[r][i]);
      cache_[r] = std::move(left);
    }
  }

  const std::vector<float>& w(const std::string& name) const { return weights_.at(name); }

  // out[r] = sum_c m[r][c] * in[c]; `rows` 0 means m.size() / in.size().
  static std::vector<float> matvec(const std::vector<float>& m, const std::vector<float>& in, size_t rows) {
    if (rows == 0) rows = m.size() / in.size();
    std::vector<float> out(rows);
    for (size_t r = 0; r < rows; ++r) {
      float s = 0.0f;
      for (size_t c = 0; c < in.size(); ++c) s += m[r * in.size() + c] * in[c];
      out[r] = s;
    }
    return out;
  }
  std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight) const {
    float ss = 0.0f;
    for (float v : x) ss += v * v;
    const float scale = 1.0f / std::sqrt(ss / static_cast<float>(x.size()) + eps_);
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * weight[i];
    return out;
  }
  // Rotates pair j of each head by pos x base^(-2j/hd) x scale / factor[j]: llama2.c / ggml "normal" rope pairs
  // adjacent elements (v[2j], v[2j+1]), NeoX pairs halves (v[j], v[j + hd/2]).
  void rope(std::vector<float>& v, size_t pos, size_t hd) const {
    for (size_t head = 0; head < v.size() / hd; ++head) {
      for (size_t j = 0; j < hd / 2; ++j) {
        float freq = rope_scale_ / std::pow(rope_base_, static_cast<float>(2 * j) / static_cast<float>(hd));
        if (!rope_factors_.empty()) freq /= rope_factors_[j];
        const float angle = static_cast<float>(pos) * freq, c = std::cos(angle), s = std::sin(angle);
        float& a = v[head * hd + (neox_ ? j : 2 * j)];
        float& b = v[head * hd + (neox_ ? j + hd / 2 : 2 * j + 1)];
        const float a0 = a, b0 = b;
        a = a0 * c - b0 * s;
        b = a0 * s + b0 * c;
      }
    }
  }
  void add_if_present(std::vector<float>& y, const std::string& name) const {
    if (const auto it = weights_.find(name); it != weights_.end()) add(y, it->second);
  }
  static void softmax(std::vector<float>& v) {
    const float max = *std::max_element(v.begin(), v.end());
    float sum = 0.0f;
    for (float& e : v) sum += (e = std::exp(e - max));
    for (float& e : v) e /= sum;
  }
  static void add(std::vector<float>& x, const std::vector<float>& y) {
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }

  size_t window_ = 0, dim_ = 0, layers_ = 0, heads_ = 0, kv_heads_ = 0, vocab_ = 0, pos_ = 0;
  NaiveEviction eviction_;
  float eps_ = 1e-5f, rope_base_ = 10000.0f, rope_scale_ = 1.0f;
  bool neox_ = false;
  std::vector<float> rope_factors_;  // empty: none
  std::map<std::string, std::vector<float>> weights_;
  std::vector<std::vector<Entry>> cache_;  // [layer * kv_heads + head]: its entries, oldest first
};

inline int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace kvs::testing
