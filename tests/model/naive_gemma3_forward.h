// A deliberately plain Gemma 3 forward pass over a GGUF file (fp32 weights, double sums, one token at a
// time, the whole history kept and masked), written from the model's description (Gemma 3 technical report,
// Hugging Face's Gemma3ForCausalLM, llama.cpp's gemma3 graph), not from the engine's code, so that tests of
// the engine's Gemma 3 path have something independent to equal:
//   x = embed(token) * sqrt(dim)
//   per layer l (a window layer unless l % 6 == 5):
//     h = rmsnorm(x) * attn_norm;  q, k, v = h Wq, h Wk, h Wv
//     q_h = rmsnorm(q_h) * q_norm, k_h = rmsnorm(k_h) * k_norm for every head
//     NeoX RoPE: base 10000 on window layers, rope.freq_base / linear factor on global ones
//     a = softmax(q . k / sqrt(head_dim), masked to positions (p - window, p] on window layers) . v
//     x += rmsnorm(a Wo) * post_attention_norm
//     h = rmsnorm(x) * ffn_norm;  x += rmsnorm((gelu_tanh(h Wgate) * h Wup) Wdown) * post_ffw_norm
//   logits = (rmsnorm(x) * output_norm) . embed^T
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/naive_math.h"

namespace kvs::testing {

using naive::add;
using naive::matvec;
using naive::softmax;

class NaiveGemma3 {
 public:
  explicit NaiveGemma3(const gguf::File& f) {
    const auto u = [&](const char* key) { return static_cast<size_t>(*f.get_int(std::string("gemma3.") + key)); };
    dim_ = u("embedding_length");
    layers_ = u("block_count");
    heads_ = u("attention.head_count");
    kv_heads_ = u("attention.head_count_kv");
    hd_ = f.get_int("gemma3.attention.key_length") ? u("attention.key_length") : dim_ / heads_;
    window_ = u("attention.sliding_window");
    eps_ = *f.get_float("gemma3.attention.layer_norm_rms_epsilon");
    global_base_ = f.get_float("gemma3.rope.freq_base").value_or(1e6);
    if (f.get_string("gemma3.rope.scaling.type").value_or("") == "linear")
      global_scale_ = 1.0 / *f.get_float("gemma3.rope.scaling.factor");
    weights_ = naive::dequantized_tensors(f);
    vocab_ = f.find_tensor("token_embd.weight")->dims[1];
    k_cache_.assign(layers_, {});
    v_cache_.assign(layers_, {});
  }

  size_t vocab() const { return vocab_; }
  bool is_window_layer(size_t layer) const { return layer % 6 != 5; }

  // Logits after feeding `token` at the next position.
  std::vector<float> step(int token) {
    const size_t kv_dim = hd_ * kv_heads_, q_dim = hd_ * heads_, pos = pos_++;
    const std::vector<float>& embedding = w("token_embd.weight");
    std::vector<double> x(dim_);
    for (size_t i = 0; i < dim_; ++i) x[i] = embedding[token * dim_ + i] * std::sqrt(double(dim_));
    for (size_t l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const bool local = is_window_layer(l);
      std::vector<double> h = rmsnorm(x, w(p + "attn_norm.weight"));
      std::vector<double> q = matvec(w(p + "attn_q.weight"), h, q_dim);
      std::vector<double> k = matvec(w(p + "attn_k.weight"), h, kv_dim);
      std::vector<double> v = matvec(w(p + "attn_v.weight"), h, kv_dim);
      for (size_t head = 0; head < heads_; ++head) head_norm(q, head, w(p + "attn_q_norm.weight"));
      for (size_t head = 0; head < kv_heads_; ++head) head_norm(k, head, w(p + "attn_k_norm.weight"));
      const double base = local ? 10000.0 : global_base_, scale = local ? 1.0 : global_scale_;
      rope_neox(q, pos, base, scale);
      rope_neox(k, pos, base, scale);
      k_cache_[l].insert(k_cache_[l].end(), k.begin(), k.end());
      v_cache_[l].insert(v_cache_[l].end(), v.begin(), v.end());
      const size_t first = local && pos + 1 > window_ ? pos + 1 - window_ : 0;  // positions (pos - window, pos]
      std::vector<double> attn(q_dim, 0.0);
      for (size_t head = 0; head < heads_; ++head) {
        const size_t g = head / (heads_ / kv_heads_);
        std::vector<double> scores(pos + 1 - first);
        for (size_t t = first; t <= pos; ++t) {
          double s = 0.0;
          for (size_t i = 0; i < hd_; ++i) s += q[head * hd_ + i] * k_cache_[l][t * kv_dim + g * hd_ + i];
          scores[t - first] = s / std::sqrt(double(hd_));
        }
        softmax(scores);
        for (size_t t = first; t <= pos; ++t) {
          for (size_t i = 0; i < hd_; ++i)
            attn[head * hd_ + i] += scores[t - first] * v_cache_[l][t * kv_dim + g * hd_ + i];
        }
      }
      add(x, rmsnorm(matvec(w(p + "attn_output.weight"), attn, dim_), w(p + "post_attention_norm.weight")));
      h = rmsnorm(x, w(p + "ffn_norm.weight"));
      std::vector<double> gate = matvec(w(p + "ffn_gate.weight"), h, 0);
      const std::vector<double> up = matvec(w(p + "ffn_up.weight"), h, gate.size());
      for (size_t i = 0; i < gate.size(); ++i) {
        const double g = gate[i];
        gate[i] = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
      }
      add(x, rmsnorm(matvec(w(p + "ffn_down.weight"), gate, dim_), w(p + "post_ffw_norm.weight")));
    }
    const std::vector<double> logits = matvec(embedding, rmsnorm(x, w("output_norm.weight")), vocab_);
    return {logits.begin(), logits.end()};
  }

 private:
  const std::vector<float>& w(const std::string& name) const { return weights_.at(name); }

  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& weight) const {
    return naive::rmsnorm(x, weight, eps_);
  }
  void head_norm(std::vector<double>& v, size_t head, const std::vector<float>& weight) const {
    const std::vector<double> one(v.begin() + head * hd_, v.begin() + (head + 1) * hd_);
    const std::vector<double> normed = rmsnorm(one, weight);
    std::copy(normed.begin(), normed.end(), v.begin() + head * hd_);
  }
  // NeoX / GPT-J: rotates (v[i], v[i + hd/2]) of each head by pos * scale * base^(-2i/hd).
  void rope_neox(std::vector<double>& v, size_t pos, double base, double scale) const {
    const size_t half = hd_ / 2;
    for (size_t head = 0; head < v.size() / hd_; ++head) {
      double* r = v.data() + head * hd_;
      for (size_t i = 0; i < half; ++i) {
        const double angle = double(pos) * scale * std::pow(base, -double(2 * i) / double(hd_));
        const double a = r[i], b = r[i + half];
        r[i] = a * std::cos(angle) - b * std::sin(angle);
        r[i + half] = a * std::sin(angle) + b * std::cos(angle);
      }
    }
  }

  size_t dim_ = 0, layers_ = 0, heads_ = 0, kv_heads_ = 0, hd_ = 0, window_ = 0, vocab_ = 0, pos_ = 0;
  double eps_ = 1e-6, global_base_ = 1e6, global_scale_ = 1.0;
  std::map<std::string, std::vector<float>> weights_;
  std::vector<std::vector<double>> k_cache_, v_cache_;  // [layer][pos * kv_dim]
};

}  // namespace kvs::testing
