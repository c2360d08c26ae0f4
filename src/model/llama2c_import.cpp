// llama2.c legacy checkpoint + tokenizer -> llama GGUF. The checkpoint is memory-mapped and each
// tensor is converted row by row while the GGUF is written, so memory stays ~ one tensor.
#include "model/llama2c_import.h"

#include <bit>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/mapped_file.h"
#include "tensor/convert.h"

namespace kvs {
namespace {

constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);

uint32_t file_type_of(const WeightTypes& weights) {              // llama.cpp's llama_ftype
  if (weights.mixed && weights.base == DType::kQ4_K) return 15;  // Q4_K_M
  if (weights.mixed && weights.base == DType::kQ5_K) return 17;  // Q5_K_M
  switch (weights.base) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ4_1: return 3;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ5_1: return 9;
    case DType::kIQ4_NL: return 25;
    case DType::kIQ4_XS: return 30;
    case DType::kBF16: return 32;
    case DType::kQ2_K: return 10;
    case DType::kQ3_K: return 11;  // Q3_K_S: every tensor Q3_K
    case DType::kQ4_K: return 14;  // Q4_K_S
    case DType::kQ5_K: return 16;  // Q5_K_S
    case DType::kQ6_K: return 18;
  }
  return 0;
}

Status check_header(const Llama2cHeader& h, const std::string& path) {
  const auto bad = [&](const std::string& why) {
    return Status::corrupt(
        fmt::format("'{}': bad llama2.c header (dim {}, hidden_dim {}, n_layers {}, n_heads {}, "
                    "n_kv_heads {}, vocab_size {}, seq_len {}): {}",
                    path, h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len, why));
  };
  if (h.dim <= 0 || h.hidden_dim <= 0 || h.n_layers <= 0 || h.n_heads <= 0 || h.n_kv_heads <= 0 || h.seq_len <= 0) {
    return bad("every size except vocab_size must be positive");
  }
  if (h.vocab_size == 0 || h.vocab_size == INT32_MIN) return bad("vocab_size must be non-zero");
  if (h.dim % h.n_heads != 0) return bad(fmt::format("dim {} is not a multiple of n_heads {}", h.dim, h.n_heads));
  if (h.n_heads % h.n_kv_heads != 0) {
    return bad(fmt::format("n_heads {} is not a multiple of n_kv_heads {}", h.n_heads, h.n_kv_heads));
  }
  if ((h.dim / h.n_heads) % 2 != 0) return bad(fmt::format("head size {} is odd", h.dim / h.n_heads));
  return Status::ok();
}

// Offsets (in floats, after the header) of each weight section of the checkpoint. `fits` is false
// when the sizes the header implies exceed 2^60 floats (no real file; the offsets are then unusable).
struct Layout {
  uint64_t embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls, total;
  bool fits;
};

Layout layout_of(const Llama2cHeader& h) {
  using u128 = unsigned __int128;  // products of three int32 values cannot overflow it
  const uint64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers, seq = h.seq_len;
  const uint64_t vocab = h.vocab_size < 0 ? -static_cast<int64_t>(h.vocab_size) : h.vocab_size;
  const uint64_t kv_dim = dim / h.n_heads * h.n_kv_heads;
  u128 at = 0;
  const auto section = [&](u128 n) {
    const u128 start = at;
    at += n;
    return static_cast<uint64_t>(start);  // only used when `fits`
  };
  Layout l{};
  l.embedding = section(u128{vocab} * dim);
  l.rms_att = section(u128{layers} * dim);
  l.wq = section(u128{layers} * dim * dim);
  l.wk = section(u128{layers} * kv_dim * dim);
  l.wv = section(u128{layers} * kv_dim * dim);
  l.wo = section(u128{layers} * dim * dim);
  l.rms_ffn = section(u128{layers} * dim);
  l.w1 = section(u128{layers} * hidden * dim);
  l.w2 = section(u128{layers} * dim * hidden);
  l.w3 = section(u128{layers} * hidden * dim);
  l.rms_final = section(dim);
  section(u128{seq} * (dim / h.n_heads));  // freq_cis_real and _imag: [seq_len][head_size / 2] each, unused
  l.wcls = section(h.vocab_size < 0 ? u128{vocab} * dim : 0);
  l.fits = at <= (u128{1} << 60);
  l.total = l.fits ? static_cast<uint64_t>(at) : 0;
  return l;
}

Expected<LlamaVocab> read_tokenizer(const std::string& path, size_t vocab_size) {
  auto map = MappedFile::open(path);
  if (!map) return map.status();
  const auto bytes = map->bytes();
  size_t at = 0;
  const auto read_i32 = [&](const char* what, size_t token) -> Expected<int32_t> {
    if (bytes.size() - at < 4) {
      return Status::corrupt(
          fmt::format("'{}': truncated tokenizer: {} of token {} at offset {} runs past the end ({} bytes)", path, what,
                      token, at, bytes.size()));
    }
    int32_t v = 0;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  const auto max_len = read_i32("max_token_length", 0);
  if (!max_len) return max_len.status();
  LlamaVocab vocab;
  for (size_t id = 0; id < vocab_size; ++id) {
    auto score = read_i32("score", id);
    if (!score) return score.status();
    auto length = read_i32("length", id);
    if (!length) return length.status();
    if (*length < 0 || static_cast<size_t>(*length) > bytes.size() - at) {
      return Status::corrupt(
          fmt::format("'{}': token {} has length {} at offset {}, past the end of the file ({} bytes)", path, id,
                      *length, at - 4, bytes.size()));
    }
    std::string text(reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(*length));
    at += static_cast<size_t>(*length);
    // llama2.c's export wrote BOS/EOS as "\n<s>\n" / "\n</s>\n" and SentencePiece's "▁" as ' '.
    TokenType type = TokenType::kNormal;
    if (id == 0) {
      type = TokenType::kUnknown;
    } else if (id == 1 || id == 2) {
      type = TokenType::kControl;
      const size_t first = text.find_first_not_of(" \n");
      text = first == std::string::npos ? "" : text.substr(first, text.find_last_not_of(" \n") - first + 1);
    } else if (text.size() == 6 && text.starts_with("<0x") && text.ends_with('>') &&
               std::isxdigit(static_cast<unsigned char>(text[3])) &&
               std::isxdigit(static_cast<unsigned char>(text[4]))) {
      type = TokenType::kByte;
    } else {
      std::string spm;
      for (char c : text) spm += c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, c);
      text = std::move(spm);
    }
    vocab.tokens.push_back(std::move(text));
    vocab.scores.push_back(std::bit_cast<float>(*score));
    vocab.types.push_back(static_cast<int32_t>(type));
  }
  if (at != bytes.size()) {
    return Status::corrupt(
        fmt::format("'{}': {} bytes remain after the {} tokens the checkpoint's vocab_size asks "
                    "for; the tokenizer does not match the checkpoint",
                    path, bytes.size() - at, vocab_size));
  }
  return vocab;
}

}  // namespace

void set_llama_metadata(gguf::Writer& w, const LlamaHParams& h, LlamaVocab vocab) {
  const std::string& a = h.architecture;
  const uint32_t head_dim = h.head_dim ? h.head_dim : h.embedding_length / h.head_count;
  w.set_string("general.architecture", a);
  w.set_string("general.name", h.name);
  w.set_u32("general.file_type", file_type_of(h.weights));
  w.set_u32(a + ".context_length", h.context_length);
  w.set_u32(a + ".embedding_length", h.embedding_length);
  w.set_u32(a + ".block_count", h.block_count);
  w.set_u32(a + ".feed_forward_length", h.feed_forward_length);
  w.set_u32(a + ".attention.head_count", h.head_count);
  w.set_u32(a + ".attention.head_count_kv", h.head_count_kv);
  if (h.head_dim) {
    w.set_u32(a + ".attention.key_length", head_dim);
    w.set_u32(a + ".attention.value_length", head_dim);
  }
  if (h.sliding_window) w.set_u32(a + ".attention.sliding_window", h.sliding_window);
  w.set_u32(a + ".rope.dimension_count", head_dim);
  w.set_f32(a + ".rope.freq_base", h.rope_freq_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", h.rms_eps);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", std::move(vocab.tokens));
  w.set_f32_array("tokenizer.ggml.scores", vocab.scores);
  w.set_i32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

Expected<WeightTypes> WeightTypes::parse(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "q4_k_m") return WeightTypes{.base = DType::kQ4_K, .mixed = true};
  if (lower == "q5_k_m") return WeightTypes{.base = DType::kQ5_K, .mixed = true};
  if (const auto type = dtype_from_name(lower)) return WeightTypes{.base = *type, .mixed = false};
  return Status::invalid_argument(fmt::format(
      "unknown weight type '{}' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k, q4_k, "
      "q5_k, q6_k, q4_k_m, q5_k_m)",
      name));
}

DType WeightTypes::for_tensor(std::string_view name, size_t layers) const {
  if (!mixed) return base;
  if (name == "output.weight" || (tied_output && name == "token_embd.weight")) return DType::kQ6_K;
  const bool more_bits_tensor = name.ends_with(".attn_v.weight") || name.ends_with(".ffn_down.weight");
  size_t layer = 0;
  if (!more_bits_tensor || !name.starts_with("blk.") ||
      std::from_chars(name.data() + 4, name.data() + name.size(), layer).ec != std::errc()) {
    return base;
  }
  const bool more_bits = layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
  return more_bits ? DType::kQ6_K : base;
}

DType type_for_rows(DType type, size_t cols) {
  if (cols % dtype_block_elements(type) == 0) return type;
  DType fallback = DType::kF16;
  switch (type) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kIQ4_XS: fallback = DType::kIQ4_NL; break;
    case DType::kQ4_K: fallback = DType::kQ5_0; break;
    case DType::kQ5_K: fallback = DType::kQ5_1; break;
    case DType::kQ6_K: fallback = DType::kQ8_0; break;
    default: break;
  }
  return cols % dtype_block_elements(fallback) == 0 ? fallback : DType::kF16;
}

Status add_matrix(gguf::Writer& writer, std::string name, DType type, size_t rows, size_t cols, RowSource rows_from,
                  size_t count) {
  type = type_for_rows(type, cols);
  std::vector<uint64_t> dims = {cols, rows};
  if (count > 1) dims.push_back(count);
  rows *= count;  // stacked matrices are rows back to back
  auto fill = [type, rows, cols, rows_from = std::move(rows_from)](std::span<std::byte> out) {
    const size_t row_bytes = dtype_row_bytes(type, cols);
    KVS_ASSERT(out.size() == rows * row_bytes, "tensor buffer of {} bytes for {} rows of {}", out.size(), rows,
               row_bytes);
    std::vector<float> row(cols);
    for (size_t r = 0; r < rows; ++r) {
      rows_from(r, row.data());
      quantize_row(type, row.data(), out.data() + r * row_bytes, cols);
    }
    return Status::ok();
  };
  return writer.add_tensor_streamed(std::move(name), type, std::move(dims), std::move(fill));
}

Status add_vector(gguf::Writer& writer, std::string name, std::span<const float> values) {
  std::vector<std::byte> bytes(values.size_bytes());
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return writer.add_tensor(std::move(name), DType::kF32, {values.size()}, std::move(bytes));
}

Status import_llama2c(const std::string& checkpoint, const std::string& tokenizer, const std::string& out_path,
                      WeightTypes types) {
  auto map = MappedFile::open(checkpoint);
  if (!map) return map.status();
  const auto bytes = map->bytes();
  if (bytes.size() < kHeaderBytes) {
    return Status::corrupt(
        fmt::format("'{}': {} bytes is too short for the 28-byte llama2.c header", checkpoint, bytes.size()));
  }
  Llama2cHeader h;
  std::memcpy(&h, bytes.data(), kHeaderBytes);
  KVS_RETURN_IF_ERROR(check_header(h, checkpoint));
  const Layout l = layout_of(h);
  const uint64_t expected = l.fits ? kHeaderBytes + l.total * sizeof(float) : UINT64_MAX;
  if (!l.fits || bytes.size() != expected) {
    return Status::corrupt(
        fmt::format("'{}': file is {} bytes but the header (dim {}, hidden_dim {}, n_layers {}, "
                    "n_heads {}, n_kv_heads {}, vocab_size {} ({} classifier), seq_len {}) "
                    "implies {} bytes",
                    checkpoint, bytes.size(), h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size,
                    h.vocab_size < 0 ? "own" : "shared", h.seq_len, expected));
  }
  const size_t vocab = static_cast<size_t>(h.vocab_size < 0 ? -static_cast<int64_t>(h.vocab_size) : h.vocab_size);
  auto tokens = read_tokenizer(tokenizer, vocab);
  if (!tokens) return tokens.status();

  const size_t dim = h.dim, hidden = h.hidden_dim, kv_dim = dim / h.n_heads * h.n_kv_heads;
  const std::byte* weights = bytes.data() + kHeaderBytes;
  // A [rows][cols] matrix at float offset `at`; layer `layer` of a stack of such matrices.
  const auto matrix = [&](uint64_t at, size_t rows, size_t cols, size_t layer) -> RowSource {
    const std::byte* base = weights + (at + layer * rows * cols) * sizeof(float);
    return
        [base, cols](size_t r, float* out) { std::memcpy(out, base + r * cols * sizeof(float), cols * sizeof(float)); };
  };
  const auto vector = [&](uint64_t at, size_t layer) {
    std::vector<float> v(dim);
    std::memcpy(v.data(), weights + (at + layer * dim) * sizeof(float), dim * sizeof(float));
    return v;
  };

  gguf::Writer w;
  const LlamaHParams hp{.name = std::filesystem::path(checkpoint).stem().string(),
                        .context_length = static_cast<uint32_t>(h.seq_len),
                        .embedding_length = static_cast<uint32_t>(h.dim),
                        .block_count = static_cast<uint32_t>(h.n_layers),
                        .feed_forward_length = static_cast<uint32_t>(h.hidden_dim),
                        .head_count = static_cast<uint32_t>(h.n_heads),
                        .head_count_kv = static_cast<uint32_t>(h.n_kv_heads),
                        .rms_eps = 1e-5f,
                        .rope_freq_base = 10000.0f,
                        .weights = types};
  set_llama_metadata(w, hp, std::move(tokens).value());
  types.tied_output = h.vocab_size > 0;  // the classifier is the embedding
  const auto add = [&](std::string name, size_t rows, size_t cols, RowSource source) {
    const DType type = types.for_tensor(name, static_cast<size_t>(h.n_layers));
    return add_matrix(w, std::move(name), type, rows, cols, std::move(source));
  };
  // Tensor order mirrors llama.cpp's converter.
  KVS_RETURN_IF_ERROR(add("token_embd.weight", vocab, dim, matrix(l.embedding, vocab, dim, 0)));
  KVS_RETURN_IF_ERROR(add_vector(w, "output_norm.weight", vector(l.rms_final, 0)));
  if (h.vocab_size < 0) {
    KVS_RETURN_IF_ERROR(add("output.weight", vocab, dim, matrix(l.wcls, vocab, dim, 0)));
  }
  for (size_t i = 0; i < static_cast<size_t>(h.n_layers); ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    KVS_RETURN_IF_ERROR(add(p + "attn_q.weight", dim, dim, matrix(l.wq, dim, dim, i)));
    KVS_RETURN_IF_ERROR(add(p + "attn_k.weight", kv_dim, dim, matrix(l.wk, kv_dim, dim, i)));
    KVS_RETURN_IF_ERROR(add(p + "attn_v.weight", kv_dim, dim, matrix(l.wv, kv_dim, dim, i)));
    KVS_RETURN_IF_ERROR(add(p + "attn_output.weight", dim, dim, matrix(l.wo, dim, dim, i)));
    KVS_RETURN_IF_ERROR(add_vector(w, p + "attn_norm.weight", vector(l.rms_att, i)));
    KVS_RETURN_IF_ERROR(add(p + "ffn_gate.weight", hidden, dim, matrix(l.w1, hidden, dim, i)));
    KVS_RETURN_IF_ERROR(add(p + "ffn_down.weight", dim, hidden, matrix(l.w2, dim, hidden, i)));
    KVS_RETURN_IF_ERROR(add(p + "ffn_up.weight", hidden, dim, matrix(l.w3, hidden, dim, i)));
    KVS_RETURN_IF_ERROR(add_vector(w, p + "ffn_norm.weight", vector(l.rms_ffn, i)));
  }
  return w.write(out_path);
}

}  // namespace kvs
