// Import of llama2.c "legacy" checkpoints and tokenizers into llama-architecture GGUF files, using
// llama.cpp's conventions (tensor names, metadata keys), plus the helpers that write those
// conventions, shared with synth.cpp.
//
// Layout choices (checked against llama.cpp's stories260K.gguf):
// - Q/K are NOT permuted: llama2.c and llama.cpp's "llama" rope both rotate adjacent pairs
//   (x[2i], x[2i+1]), so the checkpoint's wq/wk rows are stored unchanged.
// - A shared classifier writes no output.weight (readers use token_embd.weight); llama.cpp's
//   converter writes a copy instead.
// - Norms and other 1-D tensors stay F32 whatever the requested type. A 2-D weight whose row length
//   is not a multiple of the quantized block size (32) is kept F32 instead of failing, so models
//   such as stories260K (hidden 172) still convert to q8_0/q4_0 (only their ffn_down stays F32).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf.h"

namespace kvs {

// The types of a file's 2-D weights: one type for all, or llama.cpp's "_M" K-quant recipe (Q4_K_M, Q5_K_M): the base
// K-quant everywhere except output.weight (Q6_K) and attn_v / ffn_down of the layers that get more bits (Q6_K):
// the first and last eighth of the layers and every third one between (llama.cpp's use_more_bits).
struct WeightTypes {
  DType base = DType::kF32;
  bool mixed = false;        // the _M recipe (base Q4_K or Q5_K)
  bool tied_output = false;  // no output.weight: token_embd is the classifier and takes its type (llama.cpp's recipe)

  // A type name ("f16", "q8_0", "q4_k", ...) or a recipe ("q4_k_m", "q5_k_m"); upper case accepted.
  static Expected<WeightTypes> parse(std::string_view name);
  // The type of tensor `name` ("output.weight", "blk.3.attn_v.weight", ...) of a model of `layers` layers.
  DType for_tensor(std::string_view name, size_t layers) const;
};

// Converts `checkpoint` (+ llama2.c `tokenizer` export) to a GGUF at `out_path` whose 2-D
// weights have `types`.
Status import_llama2c(const std::string& checkpoint, const std::string& tokenizer, const std::string& out_path,
                      WeightTypes types);

// The llama2.c checkpoint header (7 int32 values).
struct Llama2cHeader {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // negative: the classifier is stored separately after the weights
  int32_t seq_len = 0;
};

// ---- llama GGUF conventions (shared by the importer and the synthetic-model writer) ----

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct LlamaVocab {
  std::vector<std::string> tokens;  // SentencePiece text: "▁" (U+2581) for spaces, "<0xNN>" byte tokens
  std::vector<float> scores;
  std::vector<int32_t> types;  // TokenType values
};

// The <architecture>.* hyper-parameters written as metadata.
struct LlamaHParams {
  std::string architecture = "llama";  // or "qwen2", "gemma3"
  std::string name;                    // general.name
  uint32_t context_length = 0;
  uint32_t embedding_length = 0;
  uint32_t block_count = 0;
  uint32_t feed_forward_length = 0;
  uint32_t head_count = 0;
  uint32_t head_count_kv = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  uint32_t head_dim = 0;        // 0: embedding_length / head_count; else written as key and value length
  uint32_t sliding_window = 0;  // attention.sliding_window (gemma3: of its local layers; llama: every layer)
  WeightTypes weights = {};     // for general.file_type (the _M recipes: Q4_K_M / Q5_K_M)
};

// Writes general.*, <architecture>.* and tokenizer.ggml.* keys (model "llama", unk 0, bos 1, eos 2, add_bos).
void set_llama_metadata(gguf::Writer& writer, const LlamaHParams& hparams, LlamaVocab vocab);

// Produces row `row` (`cols` floats) of a weight matrix into `out`.
using RowSource = std::function<void(size_t row, float* out)>;

// The type llama.cpp's quantizer writes for a tensor of rows of `cols` values meant to be `type`: `type` when the
// rows are whole blocks of it, else its fallback of 32-value blocks (Q2_K, Q3_K and IQ4_XS: IQ4_NL; Q4_K: Q5_0; Q5_K:
// Q5_1; Q6_K: Q8_0), or F16 when the rows are not whole blocks of that either (or `type` has no fallback).
DType type_for_rows(DType type, size_t cols);

// Adds a [rows][cols] matrix (ggml dims {cols, rows}) as a streamed tensor of type_for_rows(type, cols). Rows are
// produced while the file is written. count > 1: `count` such matrices stacked (ggml dims {cols, rows, count}: a
// layer's experts), rows_from numbering their rows 0 .. count x rows.
Status add_matrix(gguf::Writer& writer, std::string name, DType type, size_t rows, size_t cols, RowSource rows_from,
                  size_t count = 1);

// Adds a 1-D F32 tensor of `n` values (held by the writer).
Status add_vector(gguf::Writer& writer, std::string name, std::span<const float> values);

}  // namespace kvs
