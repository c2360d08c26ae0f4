#include "model/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kv/kv_layer_groups.h"
#include "model/deepseek2_config.h"
#include "model/model_support.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

Expected<size_t> required_uint(const gguf::File& file, const std::string& key) {
  const auto v = file.get_int(key);
  if (!v) {
    return file.find(key) ? Status::corrupt(fmt::format("{}: metadata '{}' is not an integer", file.path(), key))
                          : Status::corrupt(fmt::format("{}: metadata '{}' is missing", file.path(), key));
  }
  if (*v <= 0) return Status::corrupt(fmt::format("{}: metadata '{}' must be positive, got {}", file.path(), key, *v));
  return static_cast<size_t>(*v);
}

// Gemma 3 as llama.cpp runs it: 5 window layers then 1 global one (layer l is global when l % 6 == 5), window
// layers with RoPE base 10000 and no scaling, global layers with the file's base and linear scaling, the
// embedding scaled by sqrt(dim), NeoX RoPE, and queries scaled by 1/sqrt(head_dim), except for the 27B
// (62 layers), trained with 1/sqrt(dim / heads).
Status read_gemma3(const gguf::File& file, ModelConfig& c) {
  constexpr size_t kPattern = 6;
  auto window = required_uint(file, "gemma3.attention.sliding_window");
  if (!window) return window.status();
  c.layer_windows = interleaved_windows(c.num_layers, *window, kPattern);
  c.rope_style = RopeStyle::kNeox;
  c.rope_freq_base_local = 10000.0f;
  if (file.get_string("gemma3.rope.scaling.type").value_or("none") == "linear") {
    const double factor = file.get_float("gemma3.rope.scaling.factor").value_or(1.0);
    if (!(factor > 0.0)) return Status::corrupt(fmt::format("{}: RoPE scaling factor {}", file.path(), factor));
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  }
  c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
  const size_t scaled_by = c.num_layers == 62 ? c.dim / c.num_heads : c.head_dim;
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(scaled_by));
  c.final_logit_softcap = static_cast<float>(file.get_float("gemma3.final_logit_softcapping").value_or(0.0));
  return Status::ok();
}

// Linear RoPE scaling (`<arch>.rope.scaling.type` = linear, angles / factor) and Llama 3.1's per-pair factors
// (the tensor rope_freqs.weight that llama.cpp's converter computes from rope_scaling.low/high_freq_factor).
Status read_rope_scaling(const gguf::File& file, const std::string& prefix, ModelConfig& c) {
  if (file.get_string(prefix + "rope.scaling.type").value_or("none") == "linear") {
    const double factor = file.get_float(prefix + "rope.scaling.factor").value_or(1.0);
    if (!(factor > 0.0) || !std::isfinite(factor)) {
      return Status::corrupt(fmt::format("{}: RoPE scaling factor {}", file.path(), factor));
    }
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  }
  const gguf::TensorInfo* freqs = file.find_tensor("rope_freqs.weight");
  if (!freqs || c.is_gemma3()) return Status::ok();  // gemma3: check_tensors names it
  if (freqs->dims.size() != 1 || freqs->dims[0] != c.rope_dim / 2 || freqs->type != DType::kF32) {
    return Status::corrupt(
        fmt::format("{}: tensor 'rope_freqs.weight' must be f32 [{}] (rope dimension {} / 2), got "
                    "{} with {} dimensions of which the first is {}",
                    file.path(), c.rope_dim / 2, c.rope_dim, dtype_name(freqs->type), freqs->dims.size(),
                    freqs->dims.empty() ? 0 : freqs->dims[0]));
  }
  c.rope_freq_factors.resize(c.rope_dim / 2);
  std::memcpy(c.rope_freq_factors.data(), freqs->data.data(), c.rope_freq_factors.size() * sizeof(float));
  for (size_t i = 0; i < c.rope_freq_factors.size(); ++i) {
    const float f = c.rope_freq_factors[i];
    if (!(f > 0.0f) || !std::isfinite(f)) {
      return Status::corrupt(
          fmt::format("{}: rope_freqs.weight[{}] = {} is not a positive frequency factor", file.path(), i, f));
    }
  }
  return Status::ok();
}

}  // namespace

Expected<ModelConfig> ModelConfig::from_gguf(const gguf::File& file) {
  ModelConfig c;
  const auto arch = file.get_string("general.architecture");
  if (!arch) return Status::corrupt(fmt::format("{}: metadata 'general.architecture' is missing", file.path()));
  // Architectures with a forward pass. Others with the Llama tensors plus math the forward pass does not do
  // (granite's residual, embedding and logit multipliers, ...) are rejected, not approximated.
  if (!is_supported_architecture(*arch)) {
    return Status::unimplemented(fmt::format("{}: architecture '{}' is not supported (supported: {})", file.path(),
                                             *arch, supported_architectures()));
  }
  c.architecture = *arch;
  c.name = file.get_string("general.name").value_or("");
  const std::string p = *arch + ".";
  auto get = [&](const char* key, size_t& out) -> Status {
    auto v = required_uint(file, p + key);
    if (!v) return v.status();
    out = *v;
    return Status::ok();
  };
  KVS_RETURN_IF_ERROR(get("block_count", c.num_layers));
  KVS_RETURN_IF_ERROR(get("embedding_length", c.dim));
  KVS_RETURN_IF_ERROR(get("attention.head_count", c.num_heads));
  KVS_RETURN_IF_ERROR(get("feed_forward_length", c.ffn_dim));
  KVS_RETURN_IF_ERROR(get("context_length", c.context_length));
  c.num_kv_heads = static_cast<size_t>(file.get_int(p + "attention.head_count_kv").value_or(c.num_heads));
  c.head_dim = c.num_heads ? c.dim / c.num_heads : 0;
  if (auto kl = file.get_int(p + "attention.key_length")) c.head_dim = static_cast<size_t>(*kl);
  c.rope_dim = static_cast<size_t>(file.get_int(p + "rope.dimension_count").value_or(c.head_dim));
  c.rope_freq_base = static_cast<float>(file.get_float(p + "rope.freq_base").value_or(10000.0));
  c.rms_eps = static_cast<float>(file.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (c.architecture == "gemma3") {
    KVS_RETURN_IF_ERROR(read_gemma3(file, c));
  } else if (c.architecture == "deepseek2") {
    KVS_RETURN_IF_ERROR(read_deepseek2(file, c));
  } else {
    KVS_RETURN_IF_ERROR(read_rope_scaling(file, p, c));
    // Qwen2/2.5: the Llama block with Q/K/V biases, and RoPE on halves (its converter does not permute Q/K).
    // Llama files may have the biases too (attention_bias).
    const bool qwen2 = c.architecture == "qwen2";
    if (qwen2) c.rope_style = RopeStyle::kNeox;
    c.qkv_bias = qwen2 || file.find_tensor("blk.0.attn_q.bias") != nullptr;
    if (const auto window = file.get_int(p + "attention.sliding_window");
        window && *window > 0 && static_cast<size_t>(*window) < c.context_length) {
      c.layer_windows.assign(c.num_layers, static_cast<uint32_t>(*window));  // Mistral 7B v0.1: every layer
    }
  }
  if (auto vs = file.get_int(p + "vocab_size")) {
    c.vocab_size = static_cast<size_t>(*vs);
  } else if (const auto* tokens = file.get_array("tokenizer.ggml.tokens")) {
    c.vocab_size = tokens->items.size();
  } else if (const auto* emb = file.find_tensor("token_embd.weight"); emb && emb->dims.size() == 2) {
    c.vocab_size = emb->dims[1];
  }
  c.tied_output = file.find_tensor("output.weight") == nullptr;
  KVS_RETURN_IF_ERROR(c.validate().with_context(file.path()));
  KVS_RETURN_IF_ERROR(check_metadata(file, *arch, c.head_dim));
  KVS_RETURN_IF_ERROR(check_tensors(file, *arch, c.num_layers));
  return c;
}

Status ModelConfig::validate() const {
  if (num_layers == 0 || dim == 0 || num_heads == 0 || num_kv_heads == 0 || ffn_dim == 0 || vocab_size == 0) {
    return Status::corrupt(
        fmt::format("model config has a zero size: layers {}, dim {}, heads {}, kv heads {}, ffn {}, vocab {}",
                    num_layers, dim, num_heads, num_kv_heads, ffn_dim, vocab_size));
  }
  if (num_heads % num_kv_heads != 0) {
    return Status::corrupt(fmt::format("head_count {} is not a multiple of head_count_kv {}", num_heads, num_kv_heads));
  }
  if (head_dim == 0 || head_dim % 2 != 0) {
    return Status::corrupt(
        fmt::format("head dimension must be even and positive, got {} (dim {} / heads {})", head_dim, dim, num_heads));
  }
  if (rope_dim > head_dim || rope_dim % 2 != 0) {
    return Status::corrupt(
        fmt::format("rope dimension {} must be even and at most head dimension {}", rope_dim, head_dim));
  }
  if (context_length == 0) return Status::corrupt("context_length must be positive, got 0");
  if (!(rms_eps > 0.0f) || !(rope_freq_base > 0.0f)) {
    return Status::corrupt(fmt::format("rms epsilon {} and rope base {} must be positive", rms_eps, rope_freq_base));
  }
  if (is_mla() && (mla.nope_dim + rope_dim != head_dim || mla.value_dim == 0 || num_kv_heads != num_heads)) {
    return Status::corrupt(fmt::format("MLA heads: {} + rope {} != key head {}, value head {}, {} of {} KV heads",
                                       mla.nope_dim, rope_dim, head_dim, mla.value_dim, num_kv_heads, num_heads));
  }
  if (moe.num_experts > 0 && (moe.experts_used == 0 || moe.experts_used > moe.num_experts || moe.expert_ffn_dim == 0 ||
                              moe.leading_dense_layers > num_layers)) {
    return Status::corrupt(fmt::format("mixture of experts: {} of {} experts of width {}, {} dense layers of {}",
                                       moe.experts_used, moe.num_experts, moe.expert_ffn_dim, moe.leading_dense_layers,
                                       num_layers));
  }
  if (!layer_windows.empty() && layer_windows.size() != num_layers) {
    return Status::corrupt(fmt::format("{} layer windows for {} layers", layer_windows.size(), num_layers));
  }
  for (float f : {rope_freq_scale, embedding_scale}) {
    if (!(f > 0.0f) || !std::isfinite(f)) return Status::corrupt(fmt::format("scale {} must be positive", f));
  }
  if (!(attention_scale >= 0.0f) || !(final_logit_softcap >= 0.0f) || !(rope_freq_base_local >= 0.0f)) {
    return Status::corrupt(
        fmt::format("attention scale {}, logit soft-cap {} and local RoPE base {} must not be negative",
                    attention_scale, final_logit_softcap, rope_freq_base_local));
  }
  return Status::ok();
}

std::vector<float> ModelConfig::rope_frequencies(bool local) const {
  if (local)
    return rope_inverse_frequencies(rope_dim, rope_freq_base_local > 0.0f ? rope_freq_base_local : rope_freq_base);
  std::vector<float> inv_freq = rope_inverse_frequencies(rope_dim, rope_freq_base);
  if (yarn_original_context > 0) {
    // YaRN (ggml's rope_yarn, HF DeepSeek's yarn inv_freq): pairs below `low` keep their angle (they turn many
    // times within the original context), pairs above `high` are interpolated (angle x scale), a linear ramp
    // between. corr(b): the pair index whose wavelength fits the original context b times.
    const auto corr = [&](float rotations) {
      const double two_pi = 2.0 * 3.14159265358979323846;
      return rope_dim * std::log(yarn_original_context / (rotations * two_pi)) / (2.0 * std::log(rope_freq_base));
    };
    const double low = std::max(0.0, std::floor(corr(yarn_beta_fast)));
    const double high = std::min(static_cast<double>(rope_dim - 1), std::ceil(corr(yarn_beta_slow)));
    for (size_t i = 0; i < inv_freq.size(); ++i) {
      const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
      const double extrapolate = 1.0 - std::clamp(y, 0.0, 1.0);
      inv_freq[i] = static_cast<float>(inv_freq[i] * (rope_freq_scale * (1.0 - extrapolate) + extrapolate));
    }
    return inv_freq;
  }
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] *= rope_freq_scale;
    if (!rope_freq_factors.empty()) inv_freq[i] /= rope_freq_factors[i];
  }
  return inv_freq;
}

std::string ModelConfig::attention_kind() const {
  if (is_mla()) return "MLA";
  if (num_kv_heads == num_heads) return "MHA";
  if (num_kv_heads == 1) return "MQA";
  return "GQA";
}

}  // namespace kvs
