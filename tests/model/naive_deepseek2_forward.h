// A deliberately plain DeepSeek-V2 forward pass over a GGUF file (fp32 weights, double sums, one token at a time),
// written from the model's description (the DeepSeek-V2 paper, Hugging Face's DeepseekV2ForCausalLM, llama.cpp's
// deepseek2 graph), not from the engine's code, so that the engine's MLA and MoE have something independent to equal.
// It caches K and V explicitly, per head, as an MHA model would (what MLA's latent cache avoids):
//   per layer:
//     h = rmsnorm(x) * attn_norm
//     q = h Wq, or rmsnorm(h Wq_a) * q_a_norm Wq_b;   per head q_h = [q_nope (nope) | q_pe (rope)]
//     [c | k_pe] = h Wkv_a;  c = rmsnorm(c) * kv_a_norm;  k_pe, q_pe rotated (pairs 2i, 2i+1), YaRN frequencies
//     per head: k_h = [W_kb[h] c | k_pe], v_h = W_vb[h] c   (kept for every position)
//     a_h = softmax(q_h . k_h x mscale^2 / sqrt(nope + rope)) . v_h;  x += [a_h] Wo
//     h = rmsnorm(x) * ffn_norm;  x += SwiGLU(h) on dense layers; on MoE layers the shared experts' SwiGLU plus
//     sum over the top-k experts by softmax(h W_router) (ties: the lower index) of weight x expert SwiGLU(h)
//   logits = (rmsnorm(x) * output_norm) W_out
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/naive_math.h"

namespace kvs::testing {

using naive::add;
using naive::matvec;
using naive::softmax;

class NaiveDeepseek2 {
 public:
  explicit NaiveDeepseek2(const gguf::File& f) {
    const auto u = [&](const char* key, size_t fallback = 0) {
      return static_cast<size_t>(f.get_int(std::string("deepseek2.") + key).value_or(static_cast<int64_t>(fallback)));
    };
    dim_ = u("embedding_length");
    layers_ = u("block_count");
    heads_ = u("attention.head_count");
    rope_ = u("rope.dimension_count");
    r_ = u("attention.kv_lora_rank");
    q_lora_ = u("attention.q_lora_rank");
    const bool mla_keys = f.get_int("deepseek2.attention.key_length_mla").has_value();
    const size_t key = mla_keys ? u("attention.key_length_mla") : u("attention.key_length");
    value_ = mla_keys ? u("attention.value_length_mla") : u("attention.value_length");
    nope_ = key - rope_;
    experts_ = u("expert_count");
    used_ = u("expert_used_count");
    dense_ = u("leading_dense_block_count");
    norm_weights_ = f.get_bool("deepseek2.expert_weights_norm").value_or(false);
    weights_scale_ = f.get_float("deepseek2.expert_weights_scale").value_or(1.0);
    eps_ = *f.get_float("deepseek2.attention.layer_norm_rms_epsilon");
    const double base = f.get_float("deepseek2.rope.freq_base").value_or(10000.0);
    // YaRN as DeepSeek's modeling code computes it: the interpolated frequency (/ factor) and the original mixed by a
    // linear ramp over the dimension pairs between the correction dims of beta_fast = 32 and beta_slow = 1.
    double factor = 1.0, mscale = 1.0;
    for (size_t i = 0; i < rope_ / 2; ++i) inv_freq_.push_back(std::pow(base, -double(2 * i) / double(rope_)));
    if (f.get_string("deepseek2.rope.scaling.type").value_or("") == "yarn") {
      factor = *f.get_float("deepseek2.rope.scaling.factor");
      const double original = double(u("rope.scaling.original_context_length"));
      const auto correction_dim = [&](double rotations) {
        return (double(rope_) * std::log(original / (rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
      };
      const double low = std::max(std::floor(correction_dim(32.0)), 0.0);
      const double high = std::min(std::ceil(correction_dim(1.0)), double(rope_ - 1));
      for (size_t i = 0; i < inv_freq_.size(); ++i) {
        const double ramp = std::clamp((double(i) - low) / (high == low ? high - low + 0.001 : high - low), 0.0, 1.0);
        const double extrapolation_mask = 1.0 - ramp;
        inv_freq_[i] = inv_freq_[i] / factor * (1.0 - extrapolation_mask) + inv_freq_[i] * extrapolation_mask;
      }
      mscale = 1.0 + f.get_float("deepseek2.rope.scaling.yarn_log_multiplier").value_or(0.0) * std::log(factor);
    }
    score_scale_ = mscale * mscale / std::sqrt(double(key));
    weights_ = naive::dequantized_tensors(f);
    vocab_ = f.find_tensor("token_embd.weight")->dims[1];
    k_cache_.assign(layers_, {});
    v_cache_.assign(layers_, {});
  }

  size_t vocab() const { return vocab_; }

  // Logits after feeding `token` at the next position.
  std::vector<float> step(int token) {
    const size_t pos = pos_++, key = nope_ + rope_;
    const std::vector<float>& embedding = w("token_embd.weight");
    std::vector<double> x(embedding.begin() + token * dim_, embedding.begin() + (token + 1) * dim_);
    for (size_t l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const std::vector<double> h = rmsnorm(x, w(p + "attn_norm.weight"));
      std::vector<double> q =
          q_lora_ ? matvec(w(p + "attn_q_b.weight"),
                           rmsnorm(matvec(w(p + "attn_q_a.weight"), h, q_lora_), w(p + "attn_q_a_norm.weight")),
                           heads_ * key)
                  : matvec(w(p + "attn_q.weight"), h, heads_ * key);
      std::vector<double> ckv = matvec(w(p + "attn_kv_a_mqa.weight"), h, r_ + rope_);
      std::vector<double> k_pe(ckv.begin() + r_, ckv.end());
      const std::vector<double> c = rmsnorm({ckv.begin(), ckv.begin() + r_}, w(p + "attn_kv_a_norm.weight"));
      rotate(k_pe.data(), pos);
      for (size_t head = 0; head < heads_; ++head) rotate(&q[head * key + nope_], pos);
      // Expand this position's K and V for every head and keep them.
      for (size_t head = 0; head < heads_; ++head) {
        for (size_t i = 0; i < nope_; ++i) k_cache_[l].push_back(kb(p, head, i, c));
        k_cache_[l].insert(k_cache_[l].end(), k_pe.begin(), k_pe.end());
        for (size_t i = 0; i < value_; ++i) v_cache_[l].push_back(vb(p, head, i, c));
      }
      std::vector<double> attn(heads_ * value_, 0.0);
      for (size_t head = 0; head < heads_; ++head) {
        std::vector<double> scores(pos + 1);
        for (size_t t = 0; t <= pos; ++t) {
          double s = 0.0;
          for (size_t i = 0; i < key; ++i) s += q[head * key + i] * k_cache_[l][(t * heads_ + head) * key + i];
          scores[t] = s * score_scale_;
        }
        softmax(scores);
        for (size_t t = 0; t <= pos; ++t)
          for (size_t i = 0; i < value_; ++i)
            attn[head * value_ + i] += scores[t] * v_cache_[l][(t * heads_ + head) * value_ + i];
      }
      add(x, matvec(w(p + "attn_output.weight"), attn, dim_));
      const std::vector<double> hf = rmsnorm(x, w(p + "ffn_norm.weight"));
      if (experts_ == 0 || l < dense_) {
        add(x, swiglu(p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight", hf, 0, 1.0));
        continue;
      }
      std::vector<double> probs = matvec(w(p + "ffn_gate_inp.weight"), hf, experts_);
      softmax(probs);
      std::vector<size_t> order(experts_);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return probs[a] > probs[b]; });
      order.resize(used_);
      double sum = 0.0;
      for (size_t e : order) sum += probs[e];
      if (f_has(p + "ffn_gate_shexp.weight"))
        add(x, swiglu(p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight", p + "ffn_down_shexp.weight", hf, 0, 1.0));
      for (size_t e : order) {
        const double weight = probs[e] / (norm_weights_ ? sum : 1.0) * weights_scale_;
        add(x, swiglu(p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight", p + "ffn_down_exps.weight", hf, e, weight));
      }
    }
    const std::vector<float>& out = weights_.count("output.weight") ? w("output.weight") : embedding;
    const std::vector<double> logits = matvec(out, rmsnorm(x, w("output_norm.weight")), vocab_);
    return {logits.begin(), logits.end()};
  }

 private:
  const std::vector<float>& w(const std::string& name) const { return weights_.at(name); }
  bool f_has(const std::string& name) const { return weights_.count(name) > 0; }

  // W_kb[h] row i . c and W_vb[h] row i . c from attn_kv_b ([H][nope + value][r]) or attn_k_b ([H][r][nope]) and
  // attn_v_b ([H][value][r]).
  double kb(const std::string& p, size_t head, size_t i, const std::vector<double>& c) const {
    double s = 0.0;
    if (f_has(p + "attn_kv_b.weight")) {
      const std::vector<float>& m = w(p + "attn_kv_b.weight");
      for (size_t j = 0; j < r_; ++j) s += m[(head * (nope_ + value_) + i) * r_ + j] * c[j];
    } else {
      const std::vector<float>& m = w(p + "attn_k_b.weight");
      for (size_t j = 0; j < r_; ++j) s += m[(head * r_ + j) * nope_ + i] * c[j];
    }
    return s;
  }
  double vb(const std::string& p, size_t head, size_t i, const std::vector<double>& c) const {
    double s = 0.0;
    const bool whole = f_has(p + "attn_kv_b.weight");
    const std::vector<float>& m = w(p + (whole ? "attn_kv_b.weight" : "attn_v_b.weight"));
    const size_t row = whole ? head * (nope_ + value_) + nope_ + i : head * value_ + i;
    for (size_t j = 0; j < r_; ++j) s += m[row * r_ + j] * c[j];
    return s;
  }
  // weight x down(silu(gate h) * up h) of matrix `index` of the (possibly stacked) tensors.
  std::vector<double> swiglu(const std::string& gate_name, const std::string& up_name, const std::string& down_name,
                             const std::vector<double>& h, size_t index, double weight) const {
    const std::vector<float>& gate_all = w(gate_name);
    const size_t width = f_has(gate_name) && gate_name.find("_exps") != std::string::npos
                             ? gate_all.size() / dim_ / experts_
                             : gate_all.size() / dim_;
    const auto slice = [&](const std::vector<float>& m, size_t rows, size_t cols) {
      return std::vector<float>(m.begin() + index * rows * cols, m.begin() + (index + 1) * rows * cols);
    };
    std::vector<double> gate = matvec(slice(gate_all, width, dim_), h, width);
    const std::vector<double> up = matvec(slice(w(up_name), width, dim_), h, width);
    for (size_t i = 0; i < width; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    std::vector<double> out = matvec(slice(w(down_name), dim_, width), gate, dim_);
    for (double& v : out) v *= weight;
    return out;
  }
  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& weight) const {
    return naive::rmsnorm(x, weight, eps_);
  }
  // Rotates pairs (2i, 2i + 1) of a rope-wide part by pos x inv_freq[i].
  void rotate(double* v, size_t pos) const {
    for (size_t i = 0; i < rope_ / 2; ++i) {
      const double angle = double(pos) * inv_freq_[i], a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * std::cos(angle) - b * std::sin(angle);
      v[2 * i + 1] = a * std::sin(angle) + b * std::cos(angle);
    }
  }

  size_t dim_ = 0, layers_ = 0, heads_ = 0, rope_ = 0, r_ = 0, q_lora_ = 0, nope_ = 0, value_ = 0, vocab_ = 0;
  size_t experts_ = 0, used_ = 0, dense_ = 0, pos_ = 0;
  bool norm_weights_ = false;
  double weights_scale_ = 1.0, eps_ = 1e-6, score_scale_ = 1.0;
  std::vector<double> inv_freq_;
  std::map<std::string, std::vector<float>> weights_;
  std::vector<std::vector<double>> k_cache_, v_cache_;  // [layer][position][head][key or value]
};

}  // namespace kvs::testing
