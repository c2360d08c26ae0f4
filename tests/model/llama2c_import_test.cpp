// llama2.c import: our conversion of stories260K matches llama.cpp's (tensors, bytes, tokenizer),
// computes the reference greedy continuation, converts to every type, and rejects bad inputs.
#include "model/llama2c_import.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"
#include "model/naive_llama_forward.h"
#include "tensor/convert.h"

namespace kvs {
namespace {

using kvs::testing::shared_path;
using kvs::testing::TempDir;

const std::string kCheckpoint = shared_path("models/stories260K/stories260K.bin");
const std::string kTokenizer = shared_path("models/stories260K/tok512.bin");

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

TEST(Llama2cImport, F32MatchesLlamaCppConversion) {
  TempDir dir;
  const std::string out = dir.file("stories260K.gguf");
  const Status status = import_llama2c(kCheckpoint, kTokenizer, out, {.base = DType::kF32});
  ASSERT_TRUE(status) << status.message();
  auto ours = gguf::File::open(out);
  ASSERT_TRUE(ours) << ours.status().message();
  auto theirs = gguf::File::open(shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(theirs) << theirs.status().message();

  // Same tensors, except that llama.cpp stores a copy of the shared classifier as output.weight.
  EXPECT_EQ(ours->tensors().size(), 47u);
  ASSERT_EQ(theirs->tensors().size(), 48u);
  EXPECT_EQ(ours->find_tensor("output.weight"), nullptr);
  for (const auto& t : theirs->tensors()) {
    SCOPED_TRACE(t.name);
    const std::string name = t.name == "output.weight" ? "token_embd.weight" : t.name;
    const gguf::TensorInfo* mine = ours->find_tensor(name);
    ASSERT_NE(mine, nullptr);
    EXPECT_EQ(mine->type, DType::kF32);
    EXPECT_EQ(mine->dims, t.dims);
    EXPECT_TRUE(same_bytes(mine->data, t.data)) << "bytes differ";
  }
  // Same order of tensors as llama.cpp's converter (ours skips output.weight).
  EXPECT_EQ(ours->tensors()[1].name, "output_norm.weight");
  EXPECT_EQ(ours->tensors()[2].name, "blk.0.attn_q.weight");

  // Same tokenizer arrays, value for value (scores bitwise).
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
    SCOPED_TRACE(key);
    const gguf::Array* a = ours->get_array(key);
    const gguf::Array* b = theirs->get_array(key);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->element_type, b->element_type);
    ASSERT_EQ(a->items.size(), 512u);
    ASSERT_EQ(b->items.size(), 512u);
    for (size_t i = 0; i < 512; ++i) {
      const auto& x = a->items[i].data;
      const auto& y = b->items[i].data;
      if (const auto* f = std::get_if<float>(&x)) {
        ASSERT_EQ(std::bit_cast<uint32_t>(*f), std::bit_cast<uint32_t>(std::get<float>(y))) << "score " << i;
      } else {
        ASSERT_TRUE(x == y) << "item " << i;
      }
    }
  }
  // Same hyper-parameters, except the context: llama.cpp wrote its 2048 default, we the trained 512.
  for (const char* key :
       {"llama.embedding_length", "llama.feed_forward_length", "llama.block_count", "llama.attention.head_count",
        "llama.attention.head_count_kv", "llama.rope.dimension_count", "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    EXPECT_EQ(ours->get_int(key), theirs->get_int(key)) << key;
    EXPECT_EQ(ours->find(key)->type, theirs->find(key)->type) << key;
  }
  EXPECT_EQ(ours->get_float("llama.attention.layer_norm_rms_epsilon"),
            theirs->get_float("llama.attention.layer_norm_rms_epsilon"));
  EXPECT_EQ(ours->get_string("general.architecture"), "llama");
  EXPECT_EQ(ours->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(ours->get_int("llama.context_length"), 512);
  EXPECT_EQ(ours->get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(ours->get_int("general.file_type"), 0);
  EXPECT_EQ(ours->get_string("general.name"), "stories260K");
  EXPECT_EQ(ours->get_bool("tokenizer.ggml.add_bos_token"), true);
}

// End to end: the converted file, run by a plain fp32 forward pass, reproduces the independent
// reference implementation's greedy ids and logits (this also shows Q/K need no permutation).
TEST(Llama2cImport, F32ConversionReproducesReferenceGreedy) {
  TempDir dir;
  const std::string out = dir.file("stories260K.gguf");
  ASSERT_TRUE(import_llama2c(kCheckpoint, kTokenizer, out, {.base = DType::kF32}));
  auto file = gguf::File::open(out);
  ASSERT_TRUE(file) << file.status().message();
  std::ifstream golden(shared_path("reference/stories260K/greedy.jsonl"));
  std::string line;
  ASSERT_TRUE(std::getline(golden, line));
  const auto ref = nlohmann::json::parse(line);
  const auto prompt = ref["prompt_ids"].get<std::vector<int>>();
  const auto expected = ref["greedy_ids"].get<std::vector<int>>();
  const auto& checkpoints = ref["logits_checkpoints"];

  kvs::testing::NaiveLlama model(*file);
  std::vector<int> tokens = prompt;
  std::vector<int> generated;
  size_t checked = 0;
  for (size_t pos = 0; generated.size() < 40; ++pos) {
    const std::vector<float> logits = model.step(tokens[pos]);
    if (checkpoints.contains(std::to_string(pos))) {
      const auto want = checkpoints[std::to_string(pos)].get<std::vector<float>>();
      ASSERT_EQ(want.size(), logits.size());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(logits[i], want[i], 1e-3) << "pos " << pos << " id " << i;
      ++checked;
    }
    if (pos + 1 >= prompt.size()) {
      generated.push_back(kvs::testing::argmax(logits));
      tokens.push_back(generated.back());
    }
  }
  EXPECT_EQ(generated, std::vector<int>(expected.begin(), expected.begin() + 40));
  EXPECT_EQ(checked, 3u);  // positions 4, 5 and 19 fall inside the first 44 positions
}

// llama.cpp's _M recipe (llama-quant.cpp), tensor by tensor, for 24 layers: Q6_K for the classifier (the embedding
// when the output is tied to it), for attn_v and ffn_down of the first and last three layers and every third between;
// the rest at the base type. Checked against llama-quantize's files of three shapes in docs/PERFORMANCE.md.
TEST(WeightTypes, MixedRecipeGivesTheClassifierAndChosenLayersQ6_K) {
  auto types = WeightTypes::parse("Q4_K_M");
  ASSERT_TRUE(types);
  EXPECT_EQ(types->for_tensor("output.weight", 24), DType::kQ6_K);
  EXPECT_EQ(types->for_tensor("token_embd.weight", 24), DType::kQ4_K) << "not the classifier";
  types->tied_output = true;
  EXPECT_EQ(types->for_tensor("token_embd.weight", 24), DType::kQ6_K) << "the classifier";
  for (size_t layer : {0, 2, 5, 8, 11, 14, 17, 20, 21, 23})
    EXPECT_EQ(types->for_tensor(fmt::format("blk.{}.ffn_down.weight", layer), 24), DType::kQ6_K) << layer;
  for (size_t layer : {3, 4, 6, 7, 19})
    EXPECT_EQ(types->for_tensor(fmt::format("blk.{}.attn_v.weight", layer), 24), DType::kQ4_K) << layer;
  EXPECT_EQ(types->for_tensor("blk.0.attn_q.weight", 24), DType::kQ4_K);
  // Rows that are not whole super-blocks fall back to llama.cpp's 32-value types.
  EXPECT_EQ(type_for_rows(DType::kQ6_K, 896), DType::kQ8_0);
  EXPECT_EQ(type_for_rows(DType::kQ4_K, 896), DType::kQ5_0);
  EXPECT_EQ(type_for_rows(DType::kQ5_K, 1152 + 32), DType::kQ5_1);
  EXPECT_EQ(type_for_rows(DType::kIQ4_XS, 896), DType::kIQ4_NL);
  EXPECT_EQ(type_for_rows(DType::kQ4_K, 172), DType::kF16) << "not whole 32-value blocks either";
  EXPECT_EQ(type_for_rows(DType::kQ4_K, 4864), DType::kQ4_K);
}

class Llama2cImportTypes : public ::testing::TestWithParam<DType> {};

TEST_P(Llama2cImportTypes, TwoDimensionalWeightsTakeTheTypeNormsStayF32) {
  const DType type = GetParam();
  TempDir dir;
  const std::string out = dir.file("model.gguf");
  const Status status = import_llama2c(kCheckpoint, kTokenizer, out, {.base = type});
  ASSERT_TRUE(status) << status.message();
  auto ours = gguf::File::open(out);
  ASSERT_TRUE(ours) << ours.status().message();
  auto reference = gguf::File::open(shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(reference);
  const bool quantized = dtype_block_elements(type) > 1;
  EXPECT_EQ(
      ours->get_int("general.file_type"),
      (std::map<DType, int>{{DType::kF16, 1}, {DType::kBF16, 32}, {DType::kQ8_0, 7}, {DType::kQ4_0, 2}}.at(type)));
  for (const auto& t : ours->tensors()) {
    SCOPED_TRACE(t.name);
    DType want = type;
    if (t.dims.size() == 1) want = DType::kF32;  // norms
    // Rows of 172, not whole 32-value blocks: F16, as llama.cpp's quantizer writes them.
    if (quantized && t.name.ends_with("ffn_down.weight")) want = DType::kF16;
    EXPECT_EQ(t.type, want);
    // Values decode close to the f32 originals.
    const gguf::TensorInfo* f32 = reference->find_tensor(t.name);
    ASSERT_NE(f32, nullptr);
    ASSERT_EQ(f32->dims, t.dims);
    const size_t n = t.num_elements(), cols = t.dims[0];
    std::vector<float> got(n), original(n);
    for (size_t r = 0; r < n / cols; ++r) {
      dequantize_row(t.type, t.data.data() + r * dtype_row_bytes(t.type, cols), got.data() + r * cols, cols);
    }
    std::memcpy(original.data(), f32->data.data(), n * sizeof(float));
    double max_abs = 0.0, max_err = 0.0;
    for (size_t i = 0; i < n; ++i) {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(original[i])));
      max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - original[i]));
    }
    const double tolerance = t.type == DType::kF32 ? 0.0 : t.type == DType::kQ4_0 ? 0.13 : 0.01;
    EXPECT_LE(max_err, tolerance * max_abs);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Llama2cImportTypes,
                         ::testing::Values(DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Llama2cImport, UnsharedClassifierBecomesOutputWeight) {
  TempDir dir;
  std::string bytes = kvs::testing::read_bytes(kCheckpoint);
  kvs::testing::poke<int32_t>(bytes, 20, -512);  // vocab_size < 0: a classifier follows the weights
  std::string classifier(512 * 64 * sizeof(float), '\0');
  for (size_t i = 0; i < 512 * 64; ++i) {
    kvs::testing::poke<float>(classifier, i * 4, static_cast<float>(i % 97) * 0.01f);
  }
  const std::string checkpoint = dir.file("unshared.bin");
  kvs::testing::write_bytes(checkpoint, bytes + classifier);
  const std::string out = dir.file("unshared.gguf");
  const Status status = import_llama2c(checkpoint, kTokenizer, out, {.base = DType::kF32});
  ASSERT_TRUE(status) << status.message();
  auto file = gguf::File::open(out);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->tensors().size(), 48u);
  const gguf::TensorInfo* output = file->find_tensor("output.weight");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(output->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_TRUE(same_bytes(output->data, std::as_bytes(std::span(classifier.data(), classifier.size()))));
}

TEST(Llama2cImport, RejectsBadCheckpoints) {
  TempDir dir;
  const std::string valid = kvs::testing::read_bytes(kCheckpoint);
  const std::string path = dir.file("bad.bin");
  const std::string out = dir.file("out.gguf");
  const auto error_of = [&](const std::string& bytes) {
    kvs::testing::write_bytes(path, bytes);
    const Status s = import_llama2c(path, kTokenizer, out, {.base = DType::kF32});
    EXPECT_FALSE(s) << "a bad checkpoint converted";
    EXPECT_FALSE(std::filesystem::exists(out));
    return s.message();
  };
  EXPECT_EQ(error_of(valid.substr(0, valid.size() - 4)),
            fmt::format("'{}': file is 1056536 bytes but the header (dim 64, hidden_dim 172, n_layers 5, n_heads 8, "
                        "n_kv_heads 4, vocab_size 512 (shared classifier), seq_len 512) implies 1056540 bytes",
                        path));
  EXPECT_EQ(error_of(valid.substr(0, 10)),
            fmt::format("'{}': 10 bytes is too short for the 28-byte llama2.c header", path));
  std::string b = valid;
  kvs::testing::poke<int32_t>(b, 12, 7);
  EXPECT_EQ(error_of(b), fmt::format("'{}': bad llama2.c header (dim 64, hidden_dim 172, n_layers 5, n_heads 7, "
                                     "n_kv_heads 4, vocab_size 512, seq_len 512): dim 64 is not a multiple of "
                                     "n_heads 7",
                                     path));
  b = valid;
  kvs::testing::poke<int32_t>(b, 16, 3);
  EXPECT_NE(error_of(b).find("n_heads 8 is not a multiple of n_kv_heads 3"), std::string::npos);
  b = valid;
  kvs::testing::poke<int32_t>(b, 8, 0);
  EXPECT_NE(error_of(b).find("every size except vocab_size must be positive"), std::string::npos);
  b = valid;
  kvs::testing::poke<int32_t>(b, 8, 0x7fffffff);  // layers: the implied size is astronomically large
  EXPECT_NE(error_of(b).find("n_layers 2147483647"), std::string::npos);
  b = valid;
  kvs::testing::poke<int32_t>(b, 20, -512);  // claims a classifier that is not there
  EXPECT_NE(error_of(b).find("vocab_size -512 (own classifier), seq_len 512) implies 1187612 bytes"),
            std::string::npos);

  const Status missing = import_llama2c(dir.file("none.bin"), kTokenizer, out, {.base = DType::kF32});
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound);
}

TEST(Llama2cImport, RejectsBadTokenizers) {
  TempDir dir;
  const std::string valid = kvs::testing::read_bytes(kTokenizer);
  const std::string path = dir.file("tok.bin");
  const auto error_of = [&](const std::string& bytes) {
    kvs::testing::write_bytes(path, bytes);
    const Status s = import_llama2c(kCheckpoint, path, dir.file("out.gguf"), {.base = DType::kF32});
    EXPECT_EQ(s.code(), ErrorCode::kCorrupt) << s.message();
    return s.message();
  };
  EXPECT_EQ(error_of(valid + "xy"), fmt::format("'{}': 2 bytes remain after the 512 tokens the checkpoint's "
                                                "vocab_size asks for; the tokenizer does not match the checkpoint",
                                                path));
  EXPECT_EQ(error_of(valid.substr(0, valid.size() - 3)),
            fmt::format("'{}': token 511 has length 3 at offset 6220, past the end of the file (6224 bytes)", path));
  EXPECT_EQ(error_of(valid.substr(0, 2)),
            fmt::format("'{}': truncated tokenizer: max_token_length of token 0 at offset 0 runs past the end (2 "
                        "bytes)",
                        path));
}

}  // namespace
}  // namespace kvs
