#include "model/deepseek2_config.h"

#include <fmt/format.h>

#include <cmath>

namespace kvs {
namespace {

Expected<size_t> read_size(const gguf::File& file, const std::string& key, bool required, size_t fallback = 0) {
  const auto v = file.get_int(key);
  if (!v) {
    if (!required && !file.find(key)) return fallback;
    return Status::corrupt(fmt::format("{}: metadata '{}' is {}", file.path(), key,
                                       file.find(key) ? "not an integer" : "missing (a deepseek2 file needs it)"));
  }
  if (*v < 0)
    return Status::corrupt(fmt::format("{}: metadata '{}' must not be negative, got {}", file.path(), key, *v));
  return static_cast<size_t>(*v);
}

}  // namespace

Status read_deepseek2(const gguf::File& file, ModelConfig& c) {
  const std::string p = "deepseek2.";
  const auto size = [&](const char* key, size_t& out, bool required, size_t fallback = 0) -> Status {
    auto v = read_size(file, p + key, required, fallback);
    if (!v) return v.status();
    out = *v;
    return Status::ok();
  };
  MlaConfig& m = c.mla;
  KVS_RETURN_IF_ERROR(size("attention.kv_lora_rank", m.kv_lora_rank, true));
  KVS_RETURN_IF_ERROR(size("attention.q_lora_rank", m.q_lora_rank, false));
  if (m.kv_lora_rank == 0)
    return Status::corrupt(fmt::format("{}: deepseek2.attention.kv_lora_rank is 0", file.path()));
  // Newer files describe the absorbed form in key_length/value_length (kv_lora_rank + rope, kv_lora_rank) and the
  // heads in the _mla keys; older ones the heads in key_length/value_length.
  m.split_kv_b = file.find_tensor("blk.0.attn_k_b.weight") != nullptr;
  const bool mla_keys = file.find(p + "attention.key_length_mla") != nullptr;
  size_t key_length = 0;
  KVS_RETURN_IF_ERROR(size(mla_keys ? "attention.key_length_mla" : "attention.key_length", key_length, true));
  KVS_RETURN_IF_ERROR(size(mla_keys ? "attention.value_length_mla" : "attention.value_length", m.value_dim, true));
  if (key_length <= c.rope_dim || m.value_dim == 0) {
    return Status::corrupt(
        fmt::format("{}: MLA key heads of {} must be wider than the rope dimension {}, values of {} "
                    "positive",
                    file.path(), key_length, c.rope_dim, m.value_dim));
  }
  c.head_dim = key_length;
  m.nope_dim = key_length - c.rope_dim;
  c.num_kv_heads = c.num_heads;  // the expanded (naive) form is MHA; the cache holds one latent per token
  c.rope_style = RopeStyle::kInterleaved;

  MoeConfig& e = c.moe;
  KVS_RETURN_IF_ERROR(size("expert_count", e.num_experts, false));
  if (e.num_experts > 0) {
    KVS_RETURN_IF_ERROR(size("expert_used_count", e.experts_used, true));
    KVS_RETURN_IF_ERROR(size("expert_shared_count", e.shared_experts, false));
    KVS_RETURN_IF_ERROR(size("expert_feed_forward_length", e.expert_ffn_dim, true));
    KVS_RETURN_IF_ERROR(size("leading_dense_block_count", e.leading_dense_layers, false));
    if (e.experts_used == 0 || e.experts_used > e.num_experts || e.expert_ffn_dim == 0) {
      return Status::corrupt(fmt::format("{}: {} of {} experts used per token, of width {}", file.path(),
                                         e.experts_used, e.num_experts, e.expert_ffn_dim));
    }
    size_t gating = 1;
    KVS_RETURN_IF_ERROR(size("expert_gating_func", gating, false, 1));
    if (gating != 1 && gating != 2) {
      return Status::unimplemented(
          fmt::format("{}: deepseek2.expert_gating_func = {} (1: softmax, 2: sigmoid)", file.path(), gating));
    }
    e.gating = gating == 1 ? ExpertGating::kSoftmax : ExpertGating::kSigmoid;
    e.normalize_weights = file.get_bool(p + "expert_weights_norm").value_or(false);
    e.weights_scale = static_cast<float>(file.get_float(p + "expert_weights_scale").value_or(1.0));
    if (!(e.weights_scale > 0.0f) || !std::isfinite(e.weights_scale)) {
      return Status::corrupt(fmt::format("{}: expert_weights_scale {}", file.path(), e.weights_scale));
    }
  }

  const std::string scaling = file.get_string(p + "rope.scaling.type").value_or("none");
  if (scaling == "yarn") {
    const double factor = file.get_float(p + "rope.scaling.factor").value_or(1.0);
    size_t original = 0;
    KVS_RETURN_IF_ERROR(size("rope.scaling.original_context_length", original, true));
    if (!(factor >= 1.0) || !std::isfinite(factor) || original == 0) {
      return Status::corrupt(
          fmt::format("{}: YaRN factor {} (at least 1) over an original context of {}", file.path(), factor, original));
    }
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
    c.yarn_original_context = original;
    c.yarn_log_multiplier = static_cast<float>(file.get_float(p + "rope.scaling.yarn_log_multiplier").value_or(0.0));
  } else if (scaling != "none") {
    return Status::unimplemented(
        fmt::format("{}: deepseek2.rope.scaling.type '{}' (this engine runs yarn or none)", file.path(), scaling));
  }
  c.attention_scale = yarn_attention_scale(c);
  return Status::ok();
}

float yarn_attention_scale(const ModelConfig& c) {
  const float mscale =
      c.yarn_original_context > 0 ? 1.0f + c.yarn_log_multiplier * std::log(1.0f / c.rope_freq_scale) : 1.0f;
  return mscale * mscale / std::sqrt(static_cast<float>(c.head_dim));
}

}  // namespace kvs
