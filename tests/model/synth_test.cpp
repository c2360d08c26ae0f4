// Synthetic models: presets, validation, the generated vocabulary, deterministic weights with the
// documented scale, and that a random model decodes to varied tokens.
#include "model/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"
#include "model/naive_llama_forward.h"
#include "tokenizer/test_data.h"
#include "tokenizer/tokenizer.h"

namespace kvs {
namespace {

using kvs::testing::TempDir;

SynthSpec preset(std::string_view name) {
  auto spec = synth_preset(name);
  EXPECT_TRUE(spec) << spec.status().message();
  return spec ? *spec : SynthSpec{};
}

TEST(SynthPreset, Shapes) {
  const SynthSpec m110 = preset("110m");
  EXPECT_EQ(std::tie(m110.layers, m110.dim, m110.heads, m110.kv_heads, m110.ffn, m110.vocab),
            std::make_tuple(12u, 768u, 12u, 12u, 2048u, 32000u));
  EXPECT_TRUE(m110.tied_output);
  const SynthSpec g1 = preset("gemma3-1b");
  EXPECT_EQ(std::tie(g1.architecture, g1.layers, g1.dim, g1.heads, g1.kv_heads, g1.head_dim, g1.ffn, g1.vocab,
                     g1.sliding_window),
            std::make_tuple(std::string("gemma3"), 26u, 1152u, 4u, 1u, 256u, 6912u, 262144u, 512u));
  EXPECT_EQ(preset("gemma3-270m").layers, 18u);
  EXPECT_FALSE(synth_preset("gemma4"));
  const SynthSpec b1 = preset("1b");
  EXPECT_EQ(std::tie(b1.layers, b1.dim, b1.heads, b1.kv_heads, b1.ffn, b1.vocab, b1.ctx),
            std::make_tuple(22u, 2048u, 32u, 4u, 5632u, 32000u, 2048u));
  EXPECT_FALSE(b1.tied_output);
  EXPECT_EQ(preset("tiny-mha").kv_heads, 4u);
  EXPECT_EQ(preset("tiny-mqa").kv_heads, 1u);
  const SynthSpec gqa = preset("tiny-gqa");
  EXPECT_EQ(std::tie(gqa.layers, gqa.dim, gqa.heads, gqa.kv_heads, gqa.ffn, gqa.vocab),
            std::make_tuple(2u, 64u, 4u, 2u, 128u, 512u));
  for (std::string_view name : synth_preset_names()) EXPECT_TRUE(validate_synth_spec(preset(name))) << name;
  EXPECT_EQ(synth_preset("7b").status().message(),
            "unknown synth preset '7b'; known presets: 110m, 1b, llama3.2-1b, qwen2.5-0.5b, mistral-7b, tiny-mha, "
            "tiny-mqa, tiny-gqa, tiny-llama3, tiny-qwen2, tiny-mistral, gemma3-270m, gemma3-1b, tiny-gemma3, "
            "deepseek-v2-lite, tiny-deepseek2, tiny-deepseek2-dense, tiny-deepseek2-qlora");
  const SynthSpec l3 = preset("llama3.2-1b");
  EXPECT_EQ(
      std::tie(l3.layers, l3.dim, l3.heads, l3.kv_heads, l3.ffn, l3.vocab, l3.rope_factor, l3.rope_original_context),
      std::make_tuple(16u, 2048u, 32u, 8u, 8192u, 128256u, 32.0f, 8192u));
  const SynthSpec q = preset("qwen2.5-0.5b");
  EXPECT_EQ(std::tie(q.architecture, q.layers, q.dim, q.heads, q.kv_heads, q.ffn, q.vocab, q.qkv_bias),
            std::make_tuple(std::string("qwen2"), 24u, 896u, 14u, 2u, 4864u, 151936u, true));
}

// llama.cpp's converter's rule for Llama 3.1 (rope_freqs.weight), worked by hand for tiny-llama3 (head dim 16,
// base 10000, original context 64, factor 8, low 1, high 4): pair 1's wavelength is 2 pi 10000^(2/16) = 19.869,
// between 64/4 and 64/1, so s = (64 / 19.869 - 1) / 3 = 0.74037 and the factor 1 / ((1 - s) / 8 + s) = 1.29393.
TEST(SynthPreset, Llama3RopeFactorsFollowTheConvertersRule) {
  const std::vector<float> f = llama3_rope_factors(preset("tiny-llama3"), 16);
  ASSERT_EQ(f.size(), 8u);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[1], 1.29393f, 1e-4f);
  for (size_t i = 3; i < 8; ++i) EXPECT_EQ(f[i], 8.0f);
  // Llama 3.2 1B (head dim 64, base 500000, factor 32, original 8192): 1 for the fast pairs, 32 for the slow
  // ones, never decreasing between.
  const std::vector<float> l3 = llama3_rope_factors(preset("llama3.2-1b"), 64);
  EXPECT_EQ(l3.front(), 1.0f);
  EXPECT_EQ(l3.back(), 32.0f);
  for (size_t i = 1; i < l3.size(); ++i) EXPECT_GE(l3[i], l3[i - 1]) << i;
}

TEST(SynthSpecValidation, ClearErrors) {
  const auto error_of = [](SynthSpec s) { return validate_synth_spec(s).message(); };
  const std::string shape = "invalid synth shape (layers 2, dim 64, heads 4, kv_heads 4, ffn 128, vocab 512, ctx 512, ";
  SynthSpec s = preset("tiny-mha");
  s.heads = 5;
  EXPECT_EQ(error_of(s),
            "invalid synth shape (layers 2, dim 64, heads 5, kv_heads 4, ffn 128, vocab 512, ctx 512, "
            "f32): dim 64 is not a multiple of heads 5");
  s = preset("tiny-mha");
  s.kv_heads = 3;
  EXPECT_NE(error_of(s).find("heads 4 is not a multiple of kv_heads 3"), std::string::npos);
  s = preset("tiny-mha");
  s.heads = 64;
  s.kv_heads = 64;
  EXPECT_NE(error_of(s).find("head_dim 1 must be even for RoPE"), std::string::npos);
  s = preset("tiny-mha");
  s.type = DType::kQ8_0;
  s.ffn = 100;
  EXPECT_NE(error_of(s).find("q8_0 needs dim 64, ffn 100 and heads x head_dim 64 to be multiples of 32"),
            std::string::npos);
  s = preset("tiny-gemma3");
  s.sliding_window = 0;
  EXPECT_NE(error_of(s).find("gemma3 needs a sliding window"), std::string::npos);
  s.architecture = "phi3";
  EXPECT_NE(error_of(s).find("architecture 'phi3' is not one synth writes (llama, qwen2, gemma3, deepseek2)"),
            std::string::npos);
  s = preset("tiny-qwen2");
  s.qkv_bias = false;
  EXPECT_NE(error_of(s).find("qwen2 has Q/K/V biases"), std::string::npos);
  s = preset("tiny-llama3");
  s.rope_original_context = 0;
  EXPECT_NE(error_of(s).find("llama3 RoPE scaling needs an original context (got 0)"), std::string::npos);
  s.rope_original_context = 64;
  s.rope_factor = 0.5f;
  EXPECT_NE(error_of(s).find("a RoPE scaling factor must be at least 1, got 0.5"), std::string::npos);
  s = preset("tiny-mha");
  s.vocab = 100;
  EXPECT_NE(error_of(s).find("vocab 100 must be between 259 (3 special + 256 byte tokens) and"), std::string::npos);
  s = preset("tiny-mha");
  s.layers = 0;
  EXPECT_EQ(error_of(s),
            "invalid synth shape (layers 0, dim 64, heads 4, kv_heads 4, ffn 128, vocab 512, ctx 512, "
            "f32): layers, dim, heads, kv_heads, ffn and ctx must all be positive");
  s = preset("tiny-mha");
  s.rope_base = -1.0f;
  EXPECT_EQ(error_of(s), shape + "f32): rope_base must be positive, got -1");
  TempDir dir;
  EXPECT_EQ(write_synth_model(s, dir.file("x.gguf")).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}

TEST(SynthModel, TensorsMetadataAndScale) {
  TempDir dir;
  const std::string path = dir.file("gqa.gguf");
  const Status status = write_synth_model(preset("tiny-gqa"), path);
  ASSERT_TRUE(status) << status.message();
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.block_count"), 2);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 128);
  EXPECT_EQ(f->get_int("llama.context_length"), 512);
  EXPECT_EQ(f->get_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(f->get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f->get_int("kvserve.synth.seed"), 1);
  ASSERT_EQ(f->tensors().size(), 3u + 2 * 9);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(f->find_tensor("output.weight")->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(f->find_tensor("blk.1.attn_k.weight")->dims, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(f->find_tensor("blk.1.ffn_down.weight")->dims, (std::vector<uint64_t>{128, 64}));
  EXPECT_EQ(f->find_tensor("blk.1.ffn_up.weight")->dims, (std::vector<uint64_t>{64, 128}));
  const auto floats = [&](const char* name) {
    const gguf::TensorInfo* t = f->find_tensor(name);
    std::vector<float> v(t->num_elements());
    std::memcpy(v.data(), t->data.data(), t->data.size());
    return v;
  };
  for (float v : floats("blk.0.ffn_norm.weight")) ASSERT_EQ(v, 1.0f);
  // Uniform weights with std 1/sqrt(row length): |w| <= sqrt(3)/sqrt(cols), sample std close to it.
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight", "token_embd.weight"}) {
    SCOPED_TRACE(name);
    const std::vector<float> w = floats(name);
    const double cols = static_cast<double>(f->find_tensor(name)->dims[0]);
    double sum = 0.0, sum_sq = 0.0, max_abs = 0.0;
    for (float v : w) {
      sum += v;
      sum_sq += static_cast<double>(v) * v;
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
    }
    const double mean = sum / w.size(), std = std::sqrt(sum_sq / w.size() - mean * mean);
    EXPECT_NEAR(std * std::sqrt(cols), 1.0, 0.05);
    EXPECT_NEAR(mean * std::sqrt(cols), 0.0, 0.05);
    EXPECT_LE(max_abs, std::sqrt(3.0 / cols));
  }
  EXPECT_NE(floats("blk.0.attn_q.weight"), floats("blk.1.attn_q.weight"));
}

TEST(SynthModel, VocabularyIsAWorkingSentencePieceVocab) {
  TempDir dir;
  const std::string path = dir.file("mha.gguf");
  ASSERT_TRUE(write_synth_model(preset("tiny-mha"), path));
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f->get_int("tokenizer.ggml.unknown_token_id"), 0);
  const auto& tokens = f->get_array("tokenizer.ggml.tokens")->items;
  const auto& scores = f->get_array("tokenizer.ggml.scores")->items;
  const auto& types = f->get_array("tokenizer.ggml.token_type")->items;
  ASSERT_EQ(tokens.size(), 512u);
  ASSERT_EQ(scores.size(), 512u);
  ASSERT_EQ(types.size(), 512u);
  const auto text = [&](size_t i) { return *tokens[i].as_string(); };
  EXPECT_EQ(text(0), "<unk>");
  EXPECT_EQ(text(1), "<s>");
  EXPECT_EQ(text(2), "</s>");
  EXPECT_EQ(text(3), "<0x00>");
  EXPECT_EQ(text(258), "<0xFF>");
  EXPECT_EQ(text(259), "\xe2\x96\x81");
  EXPECT_EQ(text(260), "!");
  EXPECT_EQ(text(354),
            "\xe2\x96\x81"
            "a");
  EXPECT_EQ(text(406), "aa");
  EXPECT_EQ(types[0].as_int(), 2);
  EXPECT_EQ(types[1].as_int(), 3);
  EXPECT_EQ(types[100].as_int(), 6);
  EXPECT_EQ(types[300].as_int(), 1);
  std::set<std::string> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    ASSERT_TRUE(seen.insert(text(i)).second) << "duplicate token " << text(i);
    if (i < 260) continue;
    // Normal tokens: scores fall with the id, and every multi-character token merges two earlier ones.
    ASSERT_LT(*scores[i].as_float(), *scores[i - 1].as_float()) << i;
    const std::string t = text(i);
    const size_t first = t.starts_with("\xe2\x96\x81") ? 3 : 1;
    if (t.size() > first) {
      bool mergeable = false;
      for (size_t cut = first; cut < t.size(); ++cut) {
        mergeable |= seen.contains(t.substr(0, cut)) && seen.contains(t.substr(cut));
      }
      ASSERT_TRUE(mergeable) << t;
    }
  }
}

// --tokenizer-from: the model carries another file's tokenizer.* keys unchanged (here GPT-2's byte-level
// BPE on a deepseek2 model), its vocabulary sizes the embedding and classifier, and it tokenizes as
// that file does; a source without tokens is named.
TEST(SynthModel, TokenizerFromAnotherFile) {
  TempDir dir;
  const std::string source = kvs::testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  SynthSpec spec = preset("tiny-deepseek2");
  spec.tokenizer_from = source;
  ASSERT_TRUE(write_synth_model(spec, dir.file("d.gguf")));
  auto theirs = gguf::File::open(source);
  auto ours = gguf::File::open(dir.file("d.gguf"));
  ASSERT_TRUE(theirs && ours);
  size_t copied = 0;
  for (const auto& [key, value] : ours->metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    const gguf::Value* original = theirs->find(key);
    ASSERT_NE(original, nullptr) << key << " is not in the source";
    EXPECT_EQ(value, *original) << key;
    ++copied;
  }
  size_t source_keys = 0;
  for (const auto& entry : theirs->metadata()) source_keys += entry.first.starts_with("tokenizer.");
  EXPECT_EQ(copied, source_keys);
  EXPECT_EQ(ours->get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(ours->find_tensor("token_embd.weight")->dims, (std::vector<uint64_t>{64, 50257}));
  EXPECT_EQ(ours->find_tensor("output.weight")->dims, (std::vector<uint64_t>{64, 50257}));
  auto their_tokenizer = Tokenizer::from_gguf(*theirs);
  auto our_tokenizer = Tokenizer::from_gguf(*ours);
  ASSERT_TRUE(their_tokenizer && our_tokenizer);
  for (const std::string& text : kvs::testing::read_test_strings(
           kvs::testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf.inp"))) {
    EXPECT_EQ(our_tokenizer->encode(text, false), their_tokenizer->encode(text, false)) << text;
  }

  gguf::Writer empty;
  empty.set_string("general.architecture", "llama");
  ASSERT_TRUE(empty.write(dir.file("empty.gguf")));
  spec.tokenizer_from = dir.file("empty.gguf");
  const Status no_tokens = write_synth_model(spec, dir.file("e.gguf"));
  EXPECT_EQ(no_tokens.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(no_tokens.message().find("has no tokenizer.ggml.tokens"), std::string::npos) << no_tokens.message();
  spec.tokenizer_from = dir.file("missing.gguf");
  const Status missing = write_synth_model(spec, dir.file("e.gguf"));
  EXPECT_NE(missing.message().find("tokenizer source " + dir.file("missing.gguf")), std::string::npos)
      << missing.message();
}

TEST(SynthModel, SameSeedSameBytesOtherSeedOtherWeights) {
  TempDir dir;
  SynthSpec spec = preset("tiny-mqa");
  spec.type = DType::kQ8_0;
  ASSERT_TRUE(write_synth_model(spec, dir.file("a.gguf")));
  ASSERT_TRUE(write_synth_model(spec, dir.file("b.gguf")));
  EXPECT_EQ(kvs::testing::read_bytes(dir.file("a.gguf")), kvs::testing::read_bytes(dir.file("b.gguf")));
  spec.seed = 2;
  spec.tied_output = true;
  ASSERT_TRUE(write_synth_model(spec, dir.file("c.gguf")));
  auto a = gguf::File::open(dir.file("a.gguf"));
  auto c = gguf::File::open(dir.file("c.gguf"));
  ASSERT_TRUE(a && c);
  EXPECT_EQ(c->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(a->tensors().size(), c->tensors().size() + 1);
  EXPECT_EQ(a->find_tensor("blk.0.attn_k.weight")->type, DType::kQ8_0);
  EXPECT_EQ(a->find_tensor("blk.0.attn_k.weight")->dims, (std::vector<uint64_t>{64, 16}));
  EXPECT_EQ(a->find_tensor("blk.0.attn_norm.weight")->type, DType::kF32);
  EXPECT_EQ(a->get_int("general.file_type"), 7);
  const auto& wa = a->find_tensor("blk.0.attn_q.weight")->data;
  const auto& wc = c->find_tensor("blk.0.attn_q.weight")->data;
  ASSERT_EQ(wa.size(), wc.size());
  EXPECT_NE(std::memcmp(wa.data(), wc.data(), wa.size()), 0);
}

// The point of the scale: logits spread ~1 and greedy decoding wanders instead of repeating a token.
class SynthDecodes : public ::testing::TestWithParam<std::tuple<std::string, DType, bool>> {};

TEST_P(SynthDecodes, GreedyTokensVary) {
  const auto& [name, type, tied] = GetParam();
  TempDir dir;
  SynthSpec spec = preset(name);
  spec.type = type;
  spec.tied_output = tied;
  const std::string path = dir.file("m.gguf");
  ASSERT_TRUE(write_synth_model(spec, path));
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f);
  kvs::testing::NaiveLlama model(*f);
  int token = 1;
  std::set<int> distinct;
  for (int step = 0; step < 32; ++step) {
    const std::vector<float> logits = model.step(token);
    double sum = 0.0, sum_sq = 0.0;
    for (float l : logits) {
      sum += l;
      sum_sq += static_cast<double>(l) * l;
    }
    const double mean = sum / logits.size(), std = std::sqrt(sum_sq / logits.size() - mean * mean);
    ASSERT_GT(std, 0.3) << "step " << step;
    ASSERT_LT(std, 5.0) << "step " << step;
    token = kvs::testing::argmax(logits);
    distinct.insert(token);
  }
  EXPECT_GE(distinct.size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(Presets, SynthDecodes,
                         ::testing::Values(std::make_tuple("tiny-mha", DType::kF32, false),
                                           std::make_tuple("tiny-mqa", DType::kF32, true),
                                           std::make_tuple("tiny-gqa", DType::kQ4_0, false),
                                           std::make_tuple("tiny-gqa", DType::kBF16, true),
                                           std::make_tuple("tiny-llama3", DType::kF32, false),
                                           std::make_tuple("tiny-qwen2", DType::kQ8_0, true)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" +
                                           std::string(dtype_name(std::get<1>(info.param))) +
                                           (std::get<2>(info.param) ? "_tied" : "_untied");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace kvs
