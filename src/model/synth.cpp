// Synthetic llama models: shape presets, validation, a generated SentencePiece-style vocabulary,
// and random weights streamed into the GGUF writer one tensor at a time.
#include "model/synth.h"

#include <cmath>
#include <optional>
#include <string>

#include "core/splitmix64.h"
#include "gguf/gguf.h"
#include "model/llama2c_import.h"

namespace kvs {
namespace {

constexpr uint32_t kMinVocab = 3 + 256;              // <unk>, <s>, </s>, <0x00>..<0xFF>
constexpr uint64_t kMaxTensorElements = 1ull << 32;  // keeps the write buffer of one tensor <= 16 GiB

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// Rows of uniform values in [-std*sqrt(3), std*sqrt(3)) (standard deviation `std`). Each row has its
// own stream derived from (seed, tensor name, row), so the bytes do not depend on write order.
RowSource random_rows(uint64_t seed, std::string_view name, size_t cols, float std) {
  uint64_t mix = seed ^ fnv1a(name);
  const uint64_t tensor_seed = splitmix64(mix);
  const float half_width = std * std::sqrt(3.0f);
  return [tensor_seed, cols, half_width](size_t row, float* out) {
    uint64_t state = tensor_seed ^ (static_cast<uint64_t>(row) * 0xd1b54a32d192ed03ull);
    for (size_t i = 0; i < cols; ++i) {
      const float u = static_cast<float>(splitmix64(state) >> 40) * 0x1.0p-24f;  // [0, 1), exact
      out[i] = (2.0f * u - 1.0f) * half_width;
    }
  };
}

// A vocabulary that the llama SentencePiece-BPE tokenizer can use: specials, 256 byte tokens, "▁",
// printable ASCII, "▁" + letter, then lowercase words of 2, 3, 4 letters (each also with a "▁"
// prefix), as far as `size` allows. Every multi-character token is the merge of two earlier tokens
// ("▁ab" = "▁a" + "b", "abc" = "ab" + "c"), and scores fall with the id, so shorter merges win.
LlamaVocab synth_vocab(uint32_t size) {
  LlamaVocab v;
  const auto add = [&](std::string text, TokenType type) {
    if (v.tokens.size() >= size) return;
    const bool normal = type == TokenType::kNormal;
    v.scores.push_back(normal ? -static_cast<float>(v.tokens.size()) : 0.0f);
    v.tokens.push_back(std::move(text));
    v.types.push_back(static_cast<int32_t>(type));
  };
  const std::string space = "\xe2\x96\x81";  // U+2581 "▁"
  add("<unk>", TokenType::kUnknown);
  add("<s>", TokenType::kControl);
  add("</s>", TokenType::kControl);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), TokenType::kByte);
  add(space, TokenType::kNormal);
  for (char c = '!'; c <= '~'; ++c) add(std::string(1, c), TokenType::kNormal);
  for (char c = 'a'; c <= 'z'; ++c) add(space + c, TokenType::kNormal);
  for (char c = 'A'; c <= 'Z'; ++c) add(space + c, TokenType::kNormal);
  std::vector<std::string> words;  // lowercase words of the previous length
  for (char c = 'a'; c <= 'z'; ++c) words.emplace_back(1, c);
  for (int length = 2; length <= 4 && v.tokens.size() < size; ++length) {
    std::vector<std::string> longer;
    for (const auto& w : words) {
      for (char c = 'a'; c <= 'z'; ++c) longer.push_back(w + c);
    }
    for (const auto& w : longer) add(w, TokenType::kNormal);
    for (const auto& w : longer) add(space + w, TokenType::kNormal);
    words = std::move(longer);
  }
  return v;
}

uint32_t max_synth_vocab() { return static_cast<uint32_t>(kMinVocab + 1 + 94 + 52 + 2 * (676 + 17576 + 456976)); }

// deepseek2's keys as llama.cpp's converter writes them: the older form (attn_kv_b; key/value_length the MHA heads, as
// many KV heads as heads) or the newer (attn_k_b/attn_v_b; key/value_length the absorbed form, the heads in _mla
// keys, one KV head).
void set_deepseek2_metadata(gguf::Writer& w, const SynthSpec& s) {
  const SynthMla& m = s.mla;
  const std::string a = "deepseek2.";
  w.set_u32(a + "rope.dimension_count", m.rope_dim);
  w.set_u32(a + "attention.kv_lora_rank", m.kv_lora_rank);
  if (m.q_lora_rank) w.set_u32(a + "attention.q_lora_rank", m.q_lora_rank);
  if (m.split_kv_b) {
    w.set_u32(a + "attention.head_count_kv", 1);
    w.set_u32(a + "attention.key_length", m.kv_lora_rank + m.rope_dim);
    w.set_u32(a + "attention.value_length", m.kv_lora_rank);
    w.set_u32(a + "attention.key_length_mla", s.head_dim);
    w.set_u32(a + "attention.value_length_mla", m.value_dim);
  } else {
    w.set_u32(a + "attention.key_length", s.head_dim);
    w.set_u32(a + "attention.value_length", m.value_dim);
  }
  if (m.experts > 0) {
    w.set_u32(a + "expert_count", m.experts);
    w.set_u32(a + "expert_used_count", m.experts_used);
    w.set_u32(a + "expert_shared_count", m.shared_experts);
    w.set_u32(a + "expert_feed_forward_length", m.expert_ffn);
    w.set_u32(a + "leading_dense_block_count", m.leading_dense);
    w.set_bool(a + "expert_weights_norm", m.expert_weights_norm);
    w.set_f32(a + "expert_weights_scale", m.expert_weights_scale);
    w.set_u32(a + "expert_gating_func", 1);  // softmax
  }
  if (s.rope_scaling == SynthRopeScaling::kYarn) {
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", s.rope_factor);
    w.set_u32(a + "rope.scaling.original_context_length", s.rope_original_context);
    w.set_f32(a + "rope.scaling.yarn_log_multiplier", m.yarn_log_multiplier);
  }
}

// One deepseek2 layer's tensors, random as every synth matrix (std 1/sqrt(fan in)); norms 1; the router in F32 as
// real files have it.
Status add_deepseek2_layer(gguf::Writer& w, const SynthSpec& s, size_t layer, const WeightTypes& types) {
  const SynthMla& m = s.mla;
  const std::string p = fmt::format("blk.{}.", layer);
  const size_t dim = s.dim, heads = s.heads, hd = s.head_dim, r = m.kv_lora_rank, nope = hd - m.rope_dim;
  const auto matrix = [&](const std::string& name, size_t rows, size_t cols, size_t count = 1, DType type = DType::kF32,
                          bool typed = false) {
    return add_matrix(w, name, typed ? type : types.for_tensor(name, s.layers), rows, cols,
                      random_rows(s.seed, name, cols, 1.0f / std::sqrt(static_cast<float>(cols))), count);
  };
  const auto ones = [&](const std::string& name, size_t n) { return add_vector(w, name, std::vector<float>(n, 1.0f)); };
  KVS_RETURN_IF_ERROR(ones(p + "attn_norm.weight", dim));
  if (m.q_lora_rank > 0) {
    KVS_RETURN_IF_ERROR(matrix(p + "attn_q_a.weight", m.q_lora_rank, dim));
    KVS_RETURN_IF_ERROR(ones(p + "attn_q_a_norm.weight", m.q_lora_rank));
    KVS_RETURN_IF_ERROR(matrix(p + "attn_q_b.weight", heads * hd, m.q_lora_rank));
  } else {
    KVS_RETURN_IF_ERROR(matrix(p + "attn_q.weight", heads * hd, dim));
  }
  KVS_RETURN_IF_ERROR(matrix(p + "attn_kv_a_mqa.weight", r + m.rope_dim, dim));
  KVS_RETURN_IF_ERROR(ones(p + "attn_kv_a_norm.weight", r));
  if (m.split_kv_b) {
    KVS_RETURN_IF_ERROR(matrix(p + "attn_k_b.weight", r, nope, heads));
    KVS_RETURN_IF_ERROR(matrix(p + "attn_v_b.weight", m.value_dim, r, heads));
  } else {
    KVS_RETURN_IF_ERROR(matrix(p + "attn_kv_b.weight", heads * (nope + m.value_dim), r));
  }
  KVS_RETURN_IF_ERROR(matrix(p + "attn_output.weight", dim, heads * m.value_dim));
  KVS_RETURN_IF_ERROR(ones(p + "ffn_norm.weight", dim));
  if (m.experts == 0 || layer < m.leading_dense) {
    KVS_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", s.ffn, dim));
    KVS_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.ffn, dim));
    return matrix(p + "ffn_down.weight", dim, s.ffn);
  }
  KVS_RETURN_IF_ERROR(matrix(p + "ffn_gate_inp.weight", m.experts, dim, 1, DType::kF32, true));
  KVS_RETURN_IF_ERROR(matrix(p + "ffn_gate_exps.weight", m.expert_ffn, dim, m.experts));
  KVS_RETURN_IF_ERROR(matrix(p + "ffn_up_exps.weight", m.expert_ffn, dim, m.experts));
  KVS_RETURN_IF_ERROR(matrix(p + "ffn_down_exps.weight", dim, m.expert_ffn, m.experts));
  if (m.shared_experts > 0) {
    const size_t width = m.shared_experts * m.expert_ffn;
    KVS_RETURN_IF_ERROR(matrix(p + "ffn_gate_shexp.weight", width, dim));
    KVS_RETURN_IF_ERROR(matrix(p + "ffn_up_shexp.weight", width, dim));
    KVS_RETURN_IF_ERROR(matrix(p + "ffn_down_shexp.weight", dim, width));
  }
  return Status::ok();
}

}  // namespace

std::vector<float> llama3_rope_factors(const SynthSpec& s, uint32_t rope_dim) {
  constexpr double kPi = 3.14159265358979323846;
  const double original = s.rope_original_context, low = s.rope_low_freq_factor, high = s.rope_high_freq_factor;
  std::vector<float> factors(rope_dim / 2);
  for (size_t i = 0; i < factors.size(); ++i) {
    const double wavelength = 2.0 * kPi * std::pow(static_cast<double>(s.rope_base), 2.0 * i / rope_dim);
    if (wavelength < original / high) {
      factors[i] = 1.0f;
    } else if (wavelength > original / low) {
      factors[i] = s.rope_factor;
    } else {
      const double smooth = (original / wavelength - low) / (high - low);
      factors[i] = static_cast<float>(1.0 / ((1.0 - smooth) / s.rope_factor + smooth));
    }
  }
  return factors;
}

namespace {

// Each returns why `s` is invalid, or nothing.
using SynthProblem = std::optional<std::string>;

// What each architecture has and lacks.
SynthProblem architecture_problem(const SynthSpec& s) {
  if (s.architecture != "llama" && s.architecture != "qwen2" && s.architecture != "gemma3" &&
      s.architecture != "deepseek2")
    return fmt::format("architecture '{}' is not one synth writes (llama, qwen2, gemma3, deepseek2)", s.architecture);
  const SynthMla& m = s.mla;
  if (s.architecture == "deepseek2") {
    if (m.kv_lora_rank == 0 || m.rope_dim == 0 || m.value_dim == 0 || s.head_dim <= m.rope_dim || m.rope_dim % 2 != 0)
      return fmt::format(
          "deepseek2 needs a latent ({}), an even rope part ({}) narrower than the key head ({}) and a value head ({})",
          m.kv_lora_rank, m.rope_dim, s.head_dim, m.value_dim);
    if (m.experts > 0 &&
        (m.experts_used == 0 || m.experts_used > m.experts || m.expert_ffn == 0 || m.leading_dense > s.layers))
      return fmt::format("deepseek2 experts: {} used of {}, width {}, {} dense layers", m.experts_used, m.experts,
                         m.expert_ffn, m.leading_dense);
    if (s.rope_scaling != SynthRopeScaling::kNone && s.rope_scaling != SynthRopeScaling::kYarn)
      return "deepseek2's RoPE scaling is YaRN";
    if (s.qkv_bias || s.sliding_window || s.tied_output) return "deepseek2 has no biases, windows or tied output";
    if (s.head_dim == 0) return "deepseek2 needs its key head width (head_dim)";
  } else if (s.rope_scaling == SynthRopeScaling::kYarn) {
    return "YaRN is written for deepseek2 only";
  }
  const bool gemma3 = s.architecture == "gemma3";
  if (gemma3 && s.sliding_window == 0) return "gemma3 needs a sliding window";
  if (gemma3 && (s.qkv_bias || s.rope_scaling != SynthRopeScaling::kNone))
    return "gemma3 has no Q/K/V biases, and its RoPE scaling is fixed by the architecture";
  if (s.architecture == "qwen2" && !s.qkv_bias) return "qwen2 has Q/K/V biases";
  return std::nullopt;
}

SynthProblem rope_problem(const SynthSpec& s) {
  if (s.rope_scaling != SynthRopeScaling::kNone && !(s.rope_factor >= 1.0f && std::isfinite(s.rope_factor)))
    return fmt::format("a RoPE scaling factor must be at least 1, got {}", s.rope_factor);
  if (s.rope_scaling == SynthRopeScaling::kYarn && s.rope_original_context == 0)
    return "YaRN needs an original context";
  if (s.rope_scaling == SynthRopeScaling::kLlama3 &&
      (s.rope_original_context == 0 || !(s.rope_high_freq_factor > s.rope_low_freq_factor) ||
       !(s.rope_low_freq_factor > 0.0f)))
    return fmt::format(
        "llama3 RoPE scaling needs an original context (got {}) and 0 < low_freq_factor {} < high_freq_factor {}",
        s.rope_original_context, s.rope_low_freq_factor, s.rope_high_freq_factor);
  if (!(s.rope_base > 0.0f) || !std::isfinite(s.rope_base))
    return fmt::format("rope_base must be positive, got {}", s.rope_base);
  return std::nullopt;
}

// Heads, vocabulary, the weight type's blocks across every row width, the largest tensor.
SynthProblem shape_problem(const SynthSpec& s) {
  if (s.head_dim == 0 && s.dim % s.heads != 0)
    return fmt::format("dim {} is not a multiple of heads {}", s.dim, s.heads);
  if (s.heads % s.kv_heads != 0) return fmt::format("heads {} is not a multiple of kv_heads {}", s.heads, s.kv_heads);
  const uint32_t head_dim = s.head_dim ? s.head_dim : s.dim / s.heads;
  if (head_dim % 2 != 0) return fmt::format("head_dim {} must be even for RoPE", head_dim);
  if (s.vocab < kMinVocab || s.vocab > max_synth_vocab())
    return fmt::format("vocab {} must be between {} (3 special + 256 byte tokens) and {}", s.vocab, kMinVocab,
                       max_synth_vocab());
  // K-quant and IQ4_XS rows that are not whole super-blocks fall back to a type of 32-value blocks (type_for_rows).
  const size_t block = dtype_block_elements(type_for_rows(s.type, BlockQ8_0::kElements));
  if (s.mixed_k && s.type != DType::kQ4_K && s.type != DType::kQ5_K)
    return fmt::format("the _M recipe mixes Q6_K into q4_k or q5_k, not {}", dtype_name(s.type));
  if (s.architecture == "deepseek2") {
    const SynthMla& m = s.mla;
    // Rows of these widths are read by matrices: the latent, query rank, nope part (attn_k_b), expert width, values.
    for (uint32_t width : {m.kv_lora_rank, m.q_lora_rank, head_dim - m.rope_dim, m.expert_ffn, s.heads * m.value_dim}) {
      if (width % BlockQ8_0::kElements != 0 && s.type != DType::kF32 && s.type != DType::kF16 && s.type != DType::kBF16)
        return fmt::format("{} needs every deepseek2 row width to be a multiple of 32, got {}", dtype_name(s.type),
                           width);
    }
  }
  if (s.dim % block != 0 || s.ffn % block != 0 || (s.heads * head_dim) % block != 0)
    return fmt::format("{} needs dim {}, ffn {} and heads x head_dim {} to be multiples of {}", dtype_name(s.type),
                       s.dim, s.ffn, s.heads * head_dim, block);
  const uint64_t widest = std::max<uint64_t>(s.vocab, s.ffn);
  if (widest * s.dim > kMaxTensorElements)
    return fmt::format("the largest tensor would hold {} x {} elements, over the limit of {}", widest, s.dim,
                       kMaxTensorElements);
  return std::nullopt;
}

}  // namespace

Status validate_synth_spec(const SynthSpec& s) {
  SynthProblem problem;
  if (s.layers == 0 || s.dim == 0 || s.heads == 0 || s.kv_heads == 0 || s.ffn == 0 || s.ctx == 0)
    problem = "layers, dim, heads, kv_heads, ffn and ctx must all be positive";
  if (!problem) problem = architecture_problem(s);
  if (!problem) problem = rope_problem(s);
  if (!problem) problem = shape_problem(s);
  if (!problem) return Status::ok();
  return Status::invalid_argument(
      fmt::format("invalid synth shape (layers {}, dim {}, heads {}, kv_heads {}, ffn {}, vocab {}, ctx {}, {}): {}",
                  s.layers, s.dim, s.heads, s.kv_heads, s.ffn, s.vocab, s.ctx, dtype_name(s.type), *problem));
}

namespace {

// The tokenizer.* keys of another model file, and its token count.
struct BorrowedTokenizer {
  std::vector<std::pair<std::string, gguf::Value>> keys;
  uint32_t vocab = 0;
};

Expected<BorrowedTokenizer> borrow_tokenizer(const std::string& path) {
  auto file = gguf::File::open(path);
  if (!file) return file.status().with_context("tokenizer source " + path);
  const gguf::Array* tokens = file->get_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->element_type != gguf::ValueType::kString || tokens->items.empty()) {
    return Status::invalid_argument(fmt::format("tokenizer source {} has no tokenizer.ggml.tokens strings", path));
  }
  BorrowedTokenizer borrowed;
  borrowed.vocab = static_cast<uint32_t>(tokens->items.size());
  for (const auto& [key, value] : file->metadata()) {
    if (key.starts_with("tokenizer.")) borrowed.keys.emplace_back(key, value);
  }
  return borrowed;
}

}  // namespace

namespace {

LlamaHParams synth_hparams(const SynthSpec& s) {
  return {.architecture = s.architecture,
          .name = fmt::format("synth-{}{}l-{}d-{}h-{}kv", s.architecture == "llama" ? "" : s.architecture + "-",
                              s.layers, s.dim, s.heads, s.kv_heads),
          .context_length = s.ctx,
          .embedding_length = s.dim,
          .block_count = s.layers,
          .feed_forward_length = s.ffn,
          .head_count = s.heads,
          .head_count_kv = s.kv_heads,
          .rms_eps = s.architecture == "gemma3" ? 1e-6f : 1e-5f,
          .rope_freq_base = s.rope_base,
          .head_dim = s.head_dim,
          .sliding_window = s.sliding_window,
          .weights = {.base = s.type, .mixed = s.mixed_k}};
}

void set_synth_metadata(gguf::Writer& w, const SynthSpec& s, const LlamaHParams& hp,
                        std::optional<BorrowedTokenizer>& tokenizer) {
  set_llama_metadata(w, hp, synth_vocab(s.vocab));
  if (tokenizer) {
    w.erase_keys_with_prefix("tokenizer.");
    for (auto& [key, value] : tokenizer->keys) w.set(std::move(key), std::move(value));
  }
  if (!s.chat_template.empty()) w.set_string("tokenizer.chat_template", s.chat_template);
  w.set_u64("kvserve.synth.seed", s.seed);
  if (s.rope_scaling == SynthRopeScaling::kLinear) {
    w.set_string(s.architecture + ".rope.scaling.type", "linear");
    w.set_f32(s.architecture + ".rope.scaling.factor", s.rope_factor);
  }
  if (s.architecture == "deepseek2") set_deepseek2_metadata(w, s);
}

// Random tensors of one synthetic model, by name (each from its own stream: synth_rows).
struct SynthTensors {
  gguf::Writer& w;
  const SynthSpec& s;
  const WeightTypes& types;

  // std gain/sqrt(fan_in) keeps every activation O(1) at any width, so attention scores and logits have a spread
  // near 1: neither flat nor saturated, and greedy decoding produces varied tokens.
  Status matrix(const std::string& name, size_t rows, size_t cols, float gain = 1.0f) const {
    return add_matrix(w, name, types.for_tensor(name, s.layers), rows, cols,
                      random_rows(s.seed, name, cols, gain / std::sqrt(static_cast<float>(cols))));
  }
  // Biases of std 0.5: next to projections of O(1) they move every score and value visibly.
  Status bias(const std::string& name, size_t n) const {
    std::vector<float> values(n);
    random_rows(s.seed, name, n, 0.5f)(0, values.data());
    return add_vector(w, name, values);
  }
};

// One Llama-family layer (llama, qwen2, gemma3): attention, optional Q/K/V biases, Gemma's extra norms, the FFN.
Status add_llama_layer(const SynthTensors& t, size_t layer, size_t head_dim) {
  const SynthSpec& s = t.s;
  const std::string p = fmt::format("blk.{}.", layer);
  const size_t dim = s.dim, ffn = s.ffn, q_dim = head_dim * s.heads, kv_dim = head_dim * s.kv_heads;
  const std::vector<float> ones(dim, 1.0f), head_ones(head_dim, 1.0f);
  KVS_RETURN_IF_ERROR(t.matrix(p + "attn_q.weight", q_dim, dim));
  KVS_RETURN_IF_ERROR(t.matrix(p + "attn_k.weight", kv_dim, dim));
  KVS_RETURN_IF_ERROR(t.matrix(p + "attn_v.weight", kv_dim, dim));
  KVS_RETURN_IF_ERROR(t.matrix(p + "attn_output.weight", dim, q_dim));
  if (s.qkv_bias) {
    KVS_RETURN_IF_ERROR(t.bias(p + "attn_q.bias", q_dim));
    KVS_RETURN_IF_ERROR(t.bias(p + "attn_k.bias", kv_dim));
    KVS_RETURN_IF_ERROR(t.bias(p + "attn_v.bias", kv_dim));
  }
  KVS_RETURN_IF_ERROR(add_vector(t.w, p + "attn_norm.weight", ones));
  if (s.architecture == "gemma3") {
    // Norms of 1, as a freshly initialised Gemma (whose stored weights are 1 + w, w = 0).
    KVS_RETURN_IF_ERROR(add_vector(t.w, p + "attn_q_norm.weight", head_ones));
    KVS_RETURN_IF_ERROR(add_vector(t.w, p + "attn_k_norm.weight", head_ones));
    KVS_RETURN_IF_ERROR(add_vector(t.w, p + "post_attention_norm.weight", ones));
    KVS_RETURN_IF_ERROR(add_vector(t.w, p + "post_ffw_norm.weight", ones));
  }
  KVS_RETURN_IF_ERROR(t.matrix(p + "ffn_gate.weight", ffn, dim));
  KVS_RETURN_IF_ERROR(t.matrix(p + "ffn_down.weight", dim, ffn));
  KVS_RETURN_IF_ERROR(t.matrix(p + "ffn_up.weight", ffn, dim));
  return add_vector(t.w, p + "ffn_norm.weight", ones);
}

}  // namespace

Status write_synth_model(const SynthSpec& spec, const std::string& path) {
  SynthSpec s = spec;
  std::optional<BorrowedTokenizer> tokenizer;
  if (!s.tokenizer_from.empty()) {
    auto borrowed = borrow_tokenizer(s.tokenizer_from);
    if (!borrowed) return borrowed.status();
    tokenizer = std::move(*borrowed);
    s.vocab = tokenizer->vocab;
  }
  KVS_RETURN_IF_ERROR(validate_synth_spec(s));
  gguf::Writer w;
  const LlamaHParams hp = synth_hparams(s);
  set_synth_metadata(w, s, hp, tokenizer);
  const bool tied = s.tied_output || s.architecture == "gemma3";
  WeightTypes types = hp.weights;
  types.tied_output = tied;
  const SynthTensors t{.w = w, .s = s, .types = types};
  const size_t head_dim = s.head_dim ? s.head_dim : s.dim / s.heads;
  // A tied classifier scores each token by its embedding's dot product with the final state, and
  // the residual stream still holds the input token's embedding, so the model would mostly repeat
  // its input. Embeddings 10x smaller make that echo negligible next to what the layers add; an
  // output norm gain of 10 restores the logit spread.
  // (Gemma's embedding is scaled by sqrt(dim) in the forward pass, so its input rows still have an RMS of 0.1.)
  const float tied_scale = tied ? 10.0f : 1.0f;
  KVS_RETURN_IF_ERROR(t.matrix("token_embd.weight", s.vocab, s.dim, 1.0f / tied_scale));
  KVS_RETURN_IF_ERROR(add_vector(w, "output_norm.weight", std::vector<float>(s.dim, tied_scale)));
  if (s.rope_scaling == SynthRopeScaling::kLlama3) {
    KVS_RETURN_IF_ERROR(add_vector(w, "rope_freqs.weight", llama3_rope_factors(s, static_cast<uint32_t>(head_dim))));
  }
  if (!tied) KVS_RETURN_IF_ERROR(t.matrix("output.weight", s.vocab, s.dim));
  for (size_t i = 0; i < s.layers; ++i) {
    KVS_RETURN_IF_ERROR(s.architecture == "deepseek2" ? add_deepseek2_layer(w, s, i, hp.weights)
                                                      : add_llama_layer(t, i, head_dim));
  }
  return w.write(path);
}

}  // namespace kvs
