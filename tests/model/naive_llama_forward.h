// A deliberately plain llama forward pass over a GGUF file (llama2.c style, fp32, one token at a
// time), used by the converter and synth tests to check that the files they write compute what they
// should. Not the engine's forward pass: it exists so these tests do not depend on it.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "tensor/convert.h"

namespace kvs::testing {

class NaiveLlama {
 public:
  // window > 0: every layer attends to the last `window` positions only (a forced sliding window).
  explicit NaiveLlama(const gguf::File& f, size_t window = 0) : window_(window) {
    dim_ = static_cast<size_t>(*f.get_int("llama.embedding_length"));
    layers_ = static_cast<size_t>(*f.get_int("llama.block_count"));
    heads_ = static_cast<size_t>(*f.get_int("llama.attention.head_count"));
    kv_heads_ = static_cast<size_t>(*f.get_int("llama.attention.head_count_kv"));
    eps_ = static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon"));
    rope_base_ = static_cast<float>(f.get_float("llama.rope.freq_base").value_or(10000.0));
    for (const auto& t : f.tensors()) {
      std::vector<float> values(t.num_elements());
      const size_t cols = t.dims[0], row_bytes = dtype_row_bytes(t.type, cols);
      for (size_t r = 0; r < values.size() / cols; ++r) {
        dequantize_row(t.type, t.data.data() + r * row_bytes, values.data() + r * cols, cols);
      }
      weights_[t.name] = std::move(values);
    }
    vocab_ = f.find_tensor("token_embd.weight")->dims[1];
    k_cache_.assign(layers_, {});
    v_cache_.assign(layers_, {});
  }

  size_t vocab() const { return vocab_; }

  // Logits after feeding `token` at the next position.
  std::vector<float> step(int token) {
    const size_t hd = dim_ / heads_, kv_dim = hd * kv_heads_, pos = pos_++;
    std::vector<float> x(w("token_embd.weight").begin() + static_cast<ptrdiff_t>(token * dim_),
                         w("token_embd.weight").begin() + static_cast<ptrdiff_t>((token + 1) * dim_));
    for (size_t l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      std::vector<float> xb = rmsnorm(x, w(p + "attn_norm.weight"));
      std::vector<float> q = matvec(w(p + "attn_q.weight"), xb, dim_);
      std::vector<float> k = matvec(w(p + "attn_k.weight"), xb, kv_dim);
      std::vector<float> v = matvec(w(p + "attn_v.weight"), xb, kv_dim);
      rope(q, pos, hd);
      rope(k, pos, hd);
      k_cache_[l].insert(k_cache_[l].end(), k.begin(), k.end());
      v_cache_[l].insert(v_cache_[l].end(), v.begin(), v.end());
      std::vector<float> attn(dim_, 0.0f);
      for (size_t h = 0; h < heads_; ++h) {
        const size_t kvh = h / (heads_ / kv_heads_);
        const size_t first = window_ > 0 && pos + 1 > window_ ? pos + 1 - window_ : 0;
        std::vector<float> scores(pos + 1 - first);
        for (size_t t = first; t <= pos; ++t) {
          float s = 0.0f;
          for (size_t i = 0; i < hd; ++i) s += q[h * hd + i] * k_cache_[l][t * kv_dim + kvh * hd + i];
          scores[t - first] = s / std::sqrt(static_cast<float>(hd));
        }
        softmax(scores);
        for (size_t t = first; t <= pos; ++t) {
          for (size_t i = 0; i < hd; ++i)
            attn[h * hd + i] += scores[t - first] * v_cache_[l][t * kv_dim + kvh * hd + i];
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
  // llama2.c / ggml "normal" rope: rotates adjacent pairs (v[2i], v[2i+1]) of each head.
  void rope(std::vector<float>& v, size_t pos, size_t hd) const {
    for (size_t i = 0; i < v.size(); i += 2) {
      const float freq = 1.0f / std::pow(rope_base_, static_cast<float>(i % hd) / static_cast<float>(hd));
      const float angle = static_cast<float>(pos) * freq, c = std::cos(angle), s = std::sin(angle);
      const float a = v[i], b = v[i + 1];
      v[i] = a * c - b * s;
      v[i + 1] = a * s + b * c;
    }
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
  float eps_ = 1e-5f, rope_base_ = 10000.0f;
  std::map<std::string, std::vector<float>> weights_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // [layer][pos * kv_dim]
};

inline int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace kvs::testing
