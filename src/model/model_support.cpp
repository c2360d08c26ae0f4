#include "model/model_support.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <span>

namespace kvs {
namespace {

// Keys the config reads, or that say nothing about the math (tensor_data_layout names how the
// converter permuted Q/K, which is already in the weights). A sliding window is per layer in Gemma 3
// (5 window layers to 1 global) and on every layer in Mistral's first release: both are read.
constexpr std::array<std::string_view, 13> kLlamaKeys = {
    "context_length",           "embedding_length",        "block_count",          "feed_forward_length",
    "attention.head_count",     "attention.head_count_kv", "attention.key_length", "attention.layer_norm_rms_epsilon",
    "rope.dimension_count",     "rope.freq_base",          "vocab_size",           "tensor_data_layout",
    "attention.sliding_window",
};
constexpr std::array<std::string_view, 1> kGemma3Keys = {"final_logit_softcapping"};
// DeepSeek-V2: what model/deepseek2_config.cpp reads (YaRN's type, factor and original context are checked there).
constexpr std::array<std::string_view, 19> kDeepseek2Keys = {
    "attention.q_lora_rank",
    "attention.kv_lora_rank",
    "attention.value_length",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "expert_count",
    "expert_used_count",
    "expert_shared_count",
    "expert_feed_forward_length",
    "leading_dense_block_count",
    "expert_gating_func",
    "expert_weights_norm",
    "expert_weights_scale",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.original_context_length",
    "rope.scaling.yarn_log_multiplier",
    "rope.scaling.attn_factor",
    "expert_group_count",
};

// Per-layer tensors the forward pass reads; with token_embd, output_norm and output, the whole file.
constexpr std::array<std::string_view, 9> kLlamaLayerTensors = {
    "attn_norm.weight", "attn_q.weight",   "attn_k.weight", "attn_v.weight",   "attn_output.weight",
    "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
};
// Q/K/V biases: Qwen2's, or a llama file's with attention_bias (the forward pass adds them before RoPE).
constexpr std::array<std::string_view, 3> kBiasLayerTensors = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
constexpr std::array<std::string_view, 4> kGemma3LayerTensors = {"attn_q_norm.weight", "attn_k_norm.weight",
                                                                 "post_attention_norm.weight", "post_ffw_norm.weight"};

// DeepSeek-V2's layer: latent attention (queries direct or through a low-rank pair; the K/V up-projection whole or
// split per head), a dense FFN or the experts with their router and shared experts.
constexpr std::array<std::string_view, 19> kDeepseek2LayerTensors = {
    "attn_norm.weight",     "attn_q.weight",         "attn_q_a.weight",    "attn_q_a_norm.weight", "attn_q_b.weight",
    "attn_kv_a_mqa.weight", "attn_kv_a_norm.weight", "attn_kv_b.weight",   "attn_k_b.weight",      "attn_v_b.weight",
    "attn_output.weight",   "ffn_norm.weight",       "ffn_gate.weight",    "ffn_up.weight",        "ffn_down.weight",
    "ffn_gate_inp.weight",  "ffn_gate_exps.weight",  "ffn_up_exps.weight", "ffn_down_exps.weight",
};
constexpr std::array<std::string_view, 3> kSharedExpertTensors = {"ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                                                  "ffn_down_shexp.weight"};

bool is_gemma3(std::string_view architecture) { return architecture == "gemma3"; }
bool is_deepseek2(std::string_view architecture) { return architecture == "deepseek2"; }
bool is_llama(std::string_view architecture) {
  return architecture == "llama" || architecture == "mistral" || architecture == "qwen2";
}

bool contains(std::span<const std::string_view> names, std::string_view name) {
  for (std::string_view n : names)
    if (n == name) return true;
  return false;
}

Status unsupported_key(const gguf::File& file, const std::string& key, const std::string& value,
                       std::string_view what) {
  return Status::unimplemented(
      fmt::format("{}: metadata '{}' = {} ({}) is not supported by the forward pass", file.path(), key, value, what));
}

// Ok, or why a key that is present matters when its value is not the neutral one this forward pass computes.
Status check_key(const gguf::File& file, std::string_view architecture, const std::string& key, std::string_view suffix,
                 size_t head_dim) {
  const auto number = file.get_float(key);
  const auto text = file.get_string(key);
  const std::string shown = number ? fmt::format("{}", *number) : text ? "'" + *text + "'" : "(a value)";
  if (is_deepseek2(architecture)) {
    // Group-limited routing (DeepSeek-V2 236B, V3) picks experts from the best groups first: not implemented.
    if ((suffix == "expert_group_count" || suffix == "expert_group_used_count") && number && *number > 1.0)
      return unsupported_key(file, key, shown, "group-limited expert routing");
    if (suffix == "rope.scaling.attn_factor" && number && *number != 1.0)
      return unsupported_key(file, key, shown, "a YaRN attention factor other than 1");
    if (contains(kDeepseek2Keys, suffix) || suffix == "expert_group_used_count") return Status::ok();
  }
  if (contains(kLlamaKeys, suffix)) return Status::ok();
  // Linear RoPE scaling (Gemma 3's global layers, 4B and up: factor 8; older long-context Llamas); the config reads
  // both keys. Llama 3.1's scaling is the tensor rope_freqs.weight.
  const bool linear = file.get_string(std::string(architecture) + ".rope.scaling.type").value_or("") == "linear";
  if (suffix == "rope.scaling.type") {
    if (text && (*text == "linear" || *text == "none")) return Status::ok();
    return unsupported_key(file, key, shown, "RoPE scaling other than linear");
  }
  if (suffix == "rope.scaling.factor" && number && (linear ? *number > 0.0 : *number == 1.0)) return Status::ok();
  if (is_gemma3(architecture) && contains(kGemma3Keys, suffix)) return Status::ok();
  if (suffix == "attention.value_length") {
    if (number && *number == static_cast<double>(head_dim)) return Status::ok();
    return unsupported_key(file, key, shown, fmt::format("value heads wider or narrower than keys of {}", head_dim));
  }
  if (suffix == "rope.scaling.factor" || suffix == "rope.scaling.attn_factor" || suffix == "rope.scale_linear") {
    if (number && *number == 1.0) return Status::ok();
    return unsupported_key(file, key, shown, "RoPE scaling");
  }
  // Only meaningful together with a scaling type (checked above).
  if (suffix == "rope.scaling.original_context_length" || suffix == "rope.scaling.finetuned") return Status::ok();
  if (suffix == "expert_count" || suffix == "expert_used_count") {
    if (number && *number == 0.0) return Status::ok();
    return unsupported_key(file, key, shown, "mixture of experts");
  }
  return unsupported_key(file, key, shown, "a key this engine does not implement");
}

// "blk.<layer>.<name>" -> layer and name; false for other names.
bool split_layer_tensor(std::string_view name, size_t& layer, std::string_view& rest) {
  if (!name.starts_with("blk.")) return false;
  name.remove_prefix(4);
  const auto* end = name.data() + name.size();
  const auto [p, ec] = std::from_chars(name.data(), end, layer);
  if (ec != std::errc() || p == end || *p != '.') return false;
  rest = std::string_view(p + 1, static_cast<size_t>(end - p - 1));
  return true;
}

}  // namespace

bool is_supported_architecture(std::string_view architecture) {
  return is_llama(architecture) || is_gemma3(architecture) || is_deepseek2(architecture);
}

std::string_view supported_architectures() { return "llama, mistral, qwen2, gemma3, deepseek2"; }

Status check_metadata(const gguf::File& file, std::string_view architecture, size_t head_dim) {
  const std::string prefix = std::string(architecture) + ".";
  for (const auto& [key, value] : file.metadata()) {
    if (!key.starts_with(prefix)) continue;
    KVS_RETURN_IF_ERROR(check_key(file, architecture, key, std::string_view(key).substr(prefix.size()), head_dim));
  }
  return Status::ok();
}

Status check_tensors(const gguf::File& file, std::string_view architecture, size_t num_layers) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name == "token_embd.weight" || t.name == "output_norm.weight" || t.name == "output.weight") continue;
    if (t.name == "rope_freqs.weight" && is_llama(architecture)) continue;  // read by the config
    size_t layer = 0;
    std::string_view rest;
    if (split_layer_tensor(t.name, layer, rest) && layer < num_layers &&
        (is_deepseek2(architecture)
             ? contains(kDeepseek2LayerTensors, rest) || contains(kSharedExpertTensors, rest)
             : contains(kLlamaLayerTensors, rest) || (is_gemma3(architecture) && contains(kGemma3LayerTensors, rest)) ||
                   (is_llama(architecture) && contains(kBiasLayerTensors, rest)))) {
      continue;
    }
    std::string_view what = "a tensor the forward pass does not read";
    if (t.name.ends_with(".bias")) what = "a bias this block does not add";
    if (t.name == "rope_freqs.weight") what = "per-dimension RoPE frequency factors (Llama 3.1 RoPE scaling)";
    if (t.name.find("exp_probs_b") != std::string::npos)
      what = "an expert score bias (DeepSeek-V3's routing)";
    else if (t.name.find("_exps") != std::string::npos || t.name.find("ffn_gate_inp") != std::string::npos)
      what = "mixture-of-experts weights";
    return Status::unimplemented(fmt::format("{}: tensor '{}' ({}) is not supported", file.path(), t.name, what));
  }
  return Status::ok();
}

}  // namespace kvs
