#include "kv/kv_sizing.h"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <string>

namespace kvs {
namespace {

// Bits of one element (scales are counted apart).
size_t element_bits(KvDType t) {
  switch (t) {
    case KvDType::kF32: return 32;
    case KvDType::kF16:
    case KvDType::kBF16: return 16;
    case KvDType::kInt8: return 8;
    case KvDType::kInt4: return 4;
  }
  return 0;
}

bool quantized(KvDType t) { return t == KvDType::kInt8 || t == KvDType::kInt4; }
constexpr size_t kScaleBytes = 2;  // fp16 scales

}  // namespace

std::optional<KvDType> kv_dtype_from_name(std::string_view n) {
  if (n == "f32" || n == "fp32") return KvDType::kF32;
  if (n == "f16" || n == "fp16") return KvDType::kF16;
  if (n == "bf16") return KvDType::kBF16;
  if (n == "int8" || n == "q8") return KvDType::kInt8;
  if (n == "int4" || n == "q4") return KvDType::kInt4;
  return std::nullopt;
}

std::string_view kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::kF32: return "f32";
    case KvDType::kF16: return "f16";
    case KvDType::kBF16: return "bf16";
    case KvDType::kInt8: return "int8";
    case KvDType::kInt4: return "int4";
  }
  return "unknown";
}

Status KvCacheSpec::validate() const {
  if (contiguous && block_size == 0) return Status::invalid_argument("a contiguous KV block must hold a token, got 0");
  if (!contiguous && (block_size < 1 || block_size > 256 || !std::has_single_bit(block_size))) {
    return Status::invalid_argument(
        fmt::format("block_size must be a power of two between 1 and 256, got {}", block_size));
  }
  if (num_layers == 0) return Status::invalid_argument("the KV cache needs at least one layer, got 0");
  if (mla) {
    if (kv_lora_rank == 0) return Status::invalid_argument("MLA needs a latent width (kv_lora_rank), got 0");
    if (quantized(dtype) && (kv_lora_rank + rope_dim) % 2 != 0) {
      return Status::invalid_argument(
          fmt::format("int4 MLA latent width must be even, got {}", kv_lora_rank + rope_dim));
    }
    return Status::ok();
  }
  if (num_kv_heads == 0 || head_dim == 0) {
    return Status::invalid_argument(
        fmt::format("kv heads ({}) and head dim ({}) must be positive", num_kv_heads, head_dim));
  }
  if (dtype == KvDType::kInt4 && head_dim % 2 != 0) {
    return Status::invalid_argument(fmt::format("int4 KV needs an even head dim, got {}", head_dim));
  }
  return Status::ok();
}

size_t kv_pool_bytes_per_block(const KvCacheSpec& s) {
  // One pool (K, V or the MLA latent) of one layer: elements plus, when quantized, its scales.
  const size_t width = s.mla ? s.kv_lora_rank + s.rope_dim : s.num_kv_heads * s.head_dim;
  const size_t data = s.block_size * width * element_bits(s.dtype) / 8;
  return data;
}

KvBlockBytes kv_bytes_per_block(const KvCacheSpec& s) {
  const size_t pools = s.mla ? 1 : 2;
  KvBlockBytes b;
  b.data = s.num_layers * pools * kv_pool_bytes_per_block(s);
  if (quantized(s.dtype)) {
    if (s.mla) {
      b.scales = s.num_layers * s.block_size * kScaleBytes;  // one scale per token's latent
    } else {
      const size_t k_scales = s.num_kv_heads * s.head_dim * kScaleBytes;    // per channel, per block
      const size_t v_scales = s.block_size * s.num_kv_heads * kScaleBytes;  // per token and head
      b.scales = s.num_layers * (k_scales + v_scales);
    }
  }
  return b;
}

size_t kv_blocks_for_tokens(size_t tokens, size_t block_size) { return (tokens + block_size - 1) / block_size; }

size_t kv_bytes_for_sequences(const KvCacheSpec& s, size_t tokens, size_t seqs) {
  return seqs * kv_blocks_for_tokens(tokens, s.block_size) * kv_bytes_per_block(s).total();
}

double kv_bytes_per_token(const KvCacheSpec& s) {
  return static_cast<double>(kv_bytes_per_block(s).total()) / static_cast<double>(s.block_size);
}

size_t kv_blocks_in_budget(const KvCacheSpec& s, size_t budget) { return budget / kv_bytes_per_block(s).total(); }

size_t kv_max_seqs_in_budget(const KvCacheSpec& s, size_t tokens, size_t budget) {
  const size_t per_seq = kv_bytes_for_sequences(s, tokens, 1);
  return per_seq == 0 ? 0 : budget / per_seq;
}

Expected<size_t> parse_byte_size(std::string_view text) {
  std::string s(text);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0)
    return Status::invalid_argument(fmt::format("'{}' is not a byte size (e.g. 512MiB, 2GiB, 1000000)", text));
  double number = 0;
  try {
    number = std::stod(s.substr(0, i));
  } catch (...) {
    return Status::invalid_argument(fmt::format("'{}' is not a byte size (e.g. 512MiB, 2GiB, 1000000)", text));
  }
  std::string unit = s.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kib" || unit == "k")
    scale = 1024.0;
  else if (unit == "mib" || unit == "m")
    scale = 1024.0 * 1024;
  else if (unit == "gib" || unit == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "t")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    scale = 1e3;
  else if (unit == "mb")
    scale = 1e6;
  else if (unit == "gb")
    scale = 1e9;
  else if (unit == "tb")
    scale = 1e12;
  else
    return Status::invalid_argument(
        fmt::format("unknown unit '{}' in byte size '{}' (use KiB, MiB, GiB, KB, MB, GB)", s.substr(i), text));
  const double bytes = number * scale;
  if (!(bytes >= 0) || bytes > 1e18)
    return Status::invalid_argument(fmt::format("byte size '{}' is out of range", text));
  return static_cast<size_t>(std::llround(bytes));
}

const std::vector<KvModelPreset>& kv_model_presets() {
  static const std::vector<KvModelPreset> presets = {
      {"llama-2-7b", {.num_layers = 32, .num_kv_heads = 32, .head_dim = 128}, 4096},
      {"llama-2-13b", {.num_layers = 40, .num_kv_heads = 40, .head_dim = 128}, 4096},
      {"llama-3-8b", {.num_layers = 32, .num_kv_heads = 8, .head_dim = 128}, 8192},
      {"llama-3-70b", {.num_layers = 80, .num_kv_heads = 8, .head_dim = 128}, 131072},
      {"mistral-7b", {.num_layers = 32, .num_kv_heads = 8, .head_dim = 128}, 32768},
      {"qwen2.5-7b", {.num_layers = 28, .num_kv_heads = 4, .head_dim = 128}, 131072},
      {"deepseek-v2-lite", {.num_layers = 27, .mla = true, .kv_lora_rank = 512, .rope_dim = 64}, 163840},
      {"synth-1b", {.num_layers = 22, .num_kv_heads = 4, .head_dim = 64}, 2048},
      {"synth-110m", {.num_layers = 12, .num_kv_heads = 12, .head_dim = 64}, 1024},
      {"stories260k", {.num_layers = 5, .num_kv_heads = 4, .head_dim = 8}, 512},
  };
  return presets;
}

}  // namespace kvs
