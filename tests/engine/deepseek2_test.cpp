// DeepSeek-V2 (MLA and MoE) through the engine against the naive reference (model/naive_deepseek2_forward.h, which
// caches K and V expanded per head): synthetic files with experts (1 dense layer then 8 experts, 2 used, 1 shared),
// without, and with a query rank and the split attn_k_b/attn_v_b; YaRN over an original context of 64 so prompts
// cross the ramp. Attention runs absorbed (over the latent rows), expanded (per-head K/V rebuilt from the latents),
// and chosen per sequence; paged with chunked prefill, blocks smaller and larger than a chunk, and contiguous; f32 and
// f16 weights (Q8_0 within the int8-activation bound), latents in f32/f16/bf16/int8, batched, preempted, prefix hits.
//
// The bound: the engine sums in fp32 what the reference sums in double. Activations are O(1) (norms before every
// matrix, std 1/sqrt(fan in) weights), each logit is a few fp32 dot products of <= 128 terms deep per layer over 3
// layers, ~1e-6 relative each; the absorbed form reassociates q . (W c) as (W^T q) . c, the same order of error.
// 1e-4 is the bound the llama family keeps (llama_family_test). A routing flip (two experts' router scores closer
// than the fp32 error) would show as a difference of O(0.1): the test would catch it, and none occurs in these files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "engine_trace.h"
#include "kv/kv_sizing.h"
#include "model/deepseek2_forward.h"
#include "model/moe_routing.h"
#include "model/naive_deepseek2_forward.h"
#include "model/synth.h"
#include "tensor/convert.h"
#include "tensor/isa.h"
#include "tensor/latent_partial.h"
#include "tensor/ops.h"
#include "tensor/packed_weights.h"
#include "test_support.h"

namespace kvs {
namespace {

constexpr float kLogitBound = 1e-4f;

std::vector<TokenId> prompt_of(size_t n, size_t salt = 0) { return test::varied_prompt(n, salt); }

class Deepseek2 : public ::testing::Test {
 protected:
  void load(const std::string& preset, MlaForm form = MlaForm::kAuto, DType type = DType::kF32) {
    SynthSpec spec = *synth_preset(preset);
    spec.type = type;
    load(spec, form);
  }
  void load(const SynthSpec& spec, MlaForm form) {
    loaded_ = {};  // its mapping is of the file about to be rewritten
    path_ = dir_.file("deepseek2.gguf");
    ASSERT_TRUE(write_synth_model(spec, path_));
    form_ = form;
    loaded_ = test::load_model(path_);
    ASSERT_TRUE(loaded_.model && loaded_.tokenizer);
  }
  // The engine under `config` in the loaded form.
  EngineConfig with_form(EngineConfig config) const {
    config.mla_form = form_;
    return config;
  }
  test::EngineTrace trace(const EngineConfig& config, const std::vector<TokenId>& prompt, size_t n = 24) {
    return test::trace_request(*loaded_.model, *loaded_.tokenizer, pool_, with_form(config),
                               test::greedy_request(prompt, n));
  }
  // Largest logit difference of `t` from the reference over every position; greedy tokens are its argmax.
  float against_reference(const std::vector<TokenId>& prompt, const test::EngineTrace& t, const std::string& what) {
    auto file = gguf::File::open(path_);
    EXPECT_TRUE(file);
    if (!file) return INFINITY;
    testing::NaiveDeepseek2 reference(*file);
    std::vector<TokenId> fed = prompt;
    fed.insert(fed.end(), t.tokens.begin(), t.tokens.end() - 1);
    float worst = 0.0f;
    for (size_t p = 0; p < fed.size(); ++p) {
      const std::vector<float> want = reference.step(fed[p]);
      const auto it = t.logits.find(p);
      EXPECT_NE(it, t.logits.end()) << what << " position " << p;
      if (it == t.logits.end()) return INFINITY;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(it->second[i] - want[i]));
      if (p + 1 >= prompt.size()) {
        EXPECT_EQ(t.tokens[p + 1 - prompt.size()], std::max_element(want.begin(), want.end()) - want.begin())
            << what << " position " << p;
      }
    }
    EXPECT_GE(std::set<TokenId>(t.tokens.begin(), t.tokens.end()).size(), 4u) << what;
    return worst;
  }
  void expect_matches_reference(size_t prompt_length, const std::string& what) {
    const std::vector<TokenId> prompt = prompt_of(prompt_length);
    for (const auto& [config, layout] : std::vector<std::pair<EngineConfig, std::string>>{
             {{.max_batch_tokens = 5, .max_seqs = 1, .kv = {.block_size = 4}}, "paged, blocks of 4, chunks of 5"},
             {{.max_batch_tokens = 256, .max_seqs = 1, .kv = {.block_size = 16}}, "paged, blocks of 16, one chunk"},
             {{.max_seqs = 1, .kv = {.layout = KvLayout::kContiguous}}, "contiguous"}}) {
      const std::string where = fmt::format("{}: {}, prompt {}", what, layout, prompt_length);
      EXPECT_LE(against_reference(prompt, trace(config, prompt), where), kLogitBound) << where;
    }
  }

  test::TempDir dir_{std::string("deepseek2_") + ::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::string path_;
  test::LoadedModel loaded_;
  MlaForm form_ = MlaForm::kAuto;
  ThreadPool pool_{2};
};

TEST_F(Deepseek2, ConfigIsReadAsLlamaCppReadsDeepseek2) {
  load("tiny-deepseek2");
  const ModelConfig& c = loaded_.model->config();
  EXPECT_EQ(c.attention_kind(), "MLA");
  EXPECT_EQ(c.mla.kv_lora_rank, 32u);
  EXPECT_EQ(c.mla.q_lora_rank, 0u);
  EXPECT_EQ(c.head_dim, 48u);
  EXPECT_EQ(c.mla.nope_dim, 32u);
  EXPECT_EQ(c.rope_dim, 16u);
  EXPECT_EQ(c.mla.value_dim, 32u);
  EXPECT_FALSE(c.mla.split_kv_b);
  EXPECT_EQ(c.moe.num_experts, 8u);
  EXPECT_EQ(c.moe.experts_used, 2u);
  EXPECT_EQ(c.moe.shared_experts, 1u);
  EXPECT_EQ(c.moe.leading_dense_layers, 1u);
  EXPECT_FALSE(c.moe.is_moe_layer(0));
  EXPECT_TRUE(c.moe.is_moe_layer(1));
  EXPECT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.yarn_original_context, 64u);
  // mscale = 1 + 0.1 ln 4; scores x mscale^2 / sqrt(48).
  const float mscale = 1.0f + 0.1f * std::log(4.0f);
  EXPECT_NEAR(c.attention_scale, mscale * mscale / std::sqrt(48.0f), 1e-7f);
  // YaRN over 16 RoPE dims, original context 64, base 10000: the correction dims are 16 ln(64 / (32 x 2 pi)) /
  // (2 ln 10000) = -1.0 (floored, clamped to 0) and 16 ln(64 / 2 pi) / (2 ln 10000) = 2.02 (ceiled: 3). Pair 0 keeps
  // its frequency, pairs 1 and 2 lie on the ramp (2/3 and 1/3 of the way), pairs 3-7 are divided by the factor.
  const std::vector<float> plain = rope_inverse_frequencies(16, 10000.0f), yarn = c.rope_frequencies();
  EXPECT_EQ(yarn[0], plain[0]);
  EXPECT_FLOAT_EQ(yarn[1], plain[1] * (2.0f / 3.0f + 0.25f / 3.0f));
  EXPECT_FLOAT_EQ(yarn[2], plain[2] * (1.0f / 3.0f + 0.5f / 3.0f));
  for (size_t i = 3; i < 8; ++i) EXPECT_FLOAT_EQ(yarn[i], plain[i] / 4.0f) << i;

  load("tiny-deepseek2-qlora");
  const ModelConfig& q = loaded_.model->config();
  EXPECT_EQ(q.mla.q_lora_rank, 32u);
  EXPECT_TRUE(q.mla.split_kv_b);
  EXPECT_EQ(q.head_dim, 48u) << "key_length_mla, not the absorbed key_length";
  EXPECT_EQ(q.mla.value_dim, 32u);
  EXPECT_TRUE(q.moe.normalize_weights);
  EXPECT_EQ(q.moe.weights_scale, 2.0f);
}

TEST_F(Deepseek2, EveryFormAndLayoutEqualsTheNaiveReference) {
  for (const char* preset : {"tiny-deepseek2", "tiny-deepseek2-dense", "tiny-deepseek2-qlora"}) {
    for (const auto& [form, name] : std::vector<std::pair<MlaForm, std::string>>{
             {MlaForm::kAbsorbed, "absorbed"}, {MlaForm::kExpanded, "expanded"}, {MlaForm::kAuto, "auto"}}) {
      load(preset, form);
      for (size_t prompt : {7, 130}) expect_matches_reference(prompt, fmt::format("{} {}", preset, name));
    }
  }
}

// An older file's one attn_kv_b holds W_kb per head as [nope][r]; absorption reads its transpose [r][nope], built at
// load: in the file's float type as is, and for a quantized file requantized to Q8_0 (a second rounding, within half a
// Q8_0 step plus its fp16 scale's rounding), as ik_llama.cpp prepares wk_b. The value rows are read in place.
TEST_F(Deepseek2, KBuiltFromAQuantizedKvBIsItsTransposeInQ8_0) {
  for (DType type : {DType::kF32, DType::kF16, DType::kQ4_0}) {
    load("tiny-deepseek2-dense", MlaForm::kAuto, type);
    const ModelConfig& c = loaded_.model->config();
    const MlaLayerWeights& m = loaded_.model->weights().layers[1].mla;
    EXPECT_EQ(m.kv_b.type, type);
    EXPECT_EQ(m.k_b.type, type == DType::kQ4_0 ? DType::kQ8_0 : type);
    EXPECT_EQ(m.v_b.data, m.kv_b.data) << "value rows read in place";
    const size_t r = c.mla.kv_lora_rank, nope = c.mla.nope_dim, per_head = nope + c.mla.value_dim;
    std::vector<float> kv_row(r), k_row(nope);
    for (size_t h = 0; h < c.num_heads; ++h) {
      for (size_t j = 0; j < r; ++j) {
        dequantize_row(m.k_b.type, m.k_b.row(h * r + j), k_row.data(), nope);
        float largest = 0.0f, worst = 0.0f;
        for (size_t i = 0; i < nope; ++i) {
          dequantize_row(m.kv_b.type, m.kv_b.row(h * per_head + i), kv_row.data(), r);
          largest = std::max(largest, std::fabs(kv_row[j]));
          worst = std::max(worst, std::fabs(k_row[i] - kv_row[j]));
        }
        if (type == DType::kQ4_0) {
          // Step d = largest / 127, stored as fp16 (relative error <= 2^-11): |x - q d16| <= d / 2 + 127 d 2^-11.
          const float d = largest / 127.0f;
          EXPECT_LE(worst, d * (0.5f + 127.0f / 2048.0f)) << h << " " << j;
        } else {
          EXPECT_EQ(worst, 0.0f) << h << " " << j;
        }
      }
    }
  }
}

// The absorbed form's per-head matrices are packed each on its own at load (k_b built in Q8_0, v_b the value rows of a
// Q4_0 attn_kv_b): row by row they hold the bytes of the heads they were packed from, and the file loaded as stored
// (kNone) gives the same logits within the packed kernels' bound (an int8 activation rounding flipped by fp32 noise:
// tests/engine/packed_weights_test.cpp, 3% of the logits' scale), over a prompt and the decode steps after it.
TEST_F(Deepseek2, AbsorbedHeadsArePackedWithTheFileBytes) {
  if (!packed_layout_for(DType::kQ4_0) || !packed_layout_for(DType::kQ8_0)) GTEST_SKIP() << "no packed kernels here";
  load("tiny-deepseek2-dense", MlaForm::kAbsorbed, DType::kQ4_0);
  auto plain = DecoderModel::load(path_, WeightPacking::kNone);
  ASSERT_TRUE(plain) << plain.status().message();
  const ModelConfig& c = loaded_.model->config();
  const size_t r = c.mla.kv_lora_rank, value = c.mla.value_dim;
  for (size_t l = 0; l < c.num_layers; ++l) {
    const MlaLayerWeights &p = loaded_.model->weights().layers[l].mla, &f = (*plain)->weights().layers[l].mla;
    ASSERT_EQ(p.k_b_packed.size(), c.num_heads);
    ASSERT_EQ(p.v_b_packed.size(), c.num_heads);
    EXPECT_TRUE(f.k_b_packed.empty() && f.v_b_packed.empty());
    for (size_t h = 0; h < c.num_heads; ++h) {
      for (auto [pm, fm] :
           {std::pair{p.k_b_head(h, r), f.k_b_head(h, r)}, {p.v_b_head(h, value), f.v_b_head(h, value)}}) {
        ASSERT_EQ(pm.layout, *packed_layout_for(pm.type)) << "layer " << l << " head " << h;
        ASSERT_EQ(fm.layout, WeightLayout::kRows);
        ASSERT_EQ(pm.rows, fm.rows);
        std::vector<std::byte> row(fm.row_bytes());
        for (size_t i = 0; i < fm.rows; ++i) {
          unpack_row(pm, i, row.data());
          ASSERT_EQ(std::memcmp(row.data(), fm.row(i), row.size()), 0)
              << "layer " << l << " head " << h << " row " << i;
        }
      }
    }
  }
  const std::vector<TokenId> prompt = prompt_of(12);
  const EngineConfig config{.max_batch_tokens = 16, .max_seqs = 1, .kv = {.block_size = 4}};
  const test::EngineTrace a = trace(config, prompt, 8);
  const test::EngineTrace b =
      test::trace_request(**plain, *loaded_.tokenizer, pool_, with_form(config), test::greedy_request(prompt, 8));
  ASSERT_EQ(a.logits.size(), b.logits.size());
  // Positions fed the same tokens in both runs: the prompt's, then each generated one while the two agree.
  size_t fed_alike = prompt.size();
  while (fed_alike < prompt.size() + a.tokens.size() - 1 &&
         a.tokens[fed_alike - prompt.size()] == b.tokens[fed_alike - prompt.size()])
    ++fed_alike;
  EXPECT_GT(fed_alike, prompt.size()) << "not one decode step compared";
  for (size_t position = 0; position < fed_alike; ++position) {
    const std::vector<float>&la = a.logits.at(position), &lb = b.logits.at(position);
    float worst = 0.0f, scale = 0.0f;
    for (size_t i = 0; i < la.size(); ++i) {
      worst = std::max(worst, std::fabs(la[i] - lb[i]));
      scale = std::max(scale, std::fabs(lb[i]));
    }
    EXPECT_LE(worst, 3e-2f * scale) << "position " << position;
  }
}

// The two forms read the same cached latents (here rounded to f16, bf16 and int8), so with one layer (whose latents
// both forms compute from the same inputs) they agree to fp32 rounding, as over an fp32 cache. With more layers a
// layer's latent depends on the attention before it, whose fp32 rounding differs between the forms by ~1e-6; where
// that straddles a rounding boundary of the cache's element type, one element is stored one step apart (f16 2^-11,
// bf16 2^-8 relative), so the forms then differ by far less than the rounding itself changes the output: a tenth of
// it is the bound (measured: 2-4%, f16 and bf16 on avx512, avx2 and scalar; int8's coarser steps were not straddled).
TEST_F(Deepseek2, AbsorbedEqualsExpandedOverQuantizedLatents) {
  const auto run = [&](const SynthSpec& spec, MlaForm form, KvDType dtype) {
    load(spec, form);
    return trace({.max_batch_tokens = 7, .max_seqs = 1, .kv = {.block_size = 8, .dtype = dtype}}, prompt_of(50));
  };
  SynthSpec one_layer = *synth_preset("tiny-deepseek2");
  one_layer.layers = 1;
  one_layer.mla.leading_dense = 0;  // its one layer has the experts
  one_layer.mla.kv_lora_rank = 48;  // a latent row of 64: the SIMD int8 kernels' (the three-layer one's 48: scalar)
  const SynthSpec three_layers = *synth_preset("tiny-deepseek2");
  for (KvDType dtype : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kInt8}) {
    const std::string what(kv_dtype_name(dtype));
    const test::EngineTrace absorbed = run(one_layer, MlaForm::kAbsorbed, dtype);
    const test::EngineTrace expanded = run(one_layer, MlaForm::kExpanded, dtype);
    EXPECT_EQ(absorbed.tokens, expanded.tokens) << what;
    const test::EngineTrace absorbed3 = run(three_layers, MlaForm::kAbsorbed, dtype);
    const test::EngineTrace expanded3 = run(three_layers, MlaForm::kExpanded, dtype);
    EXPECT_EQ(absorbed3.tokens, expanded3.tokens) << what;
    if (dtype == KvDType::kBF16 && best_latent_kernel()) {
      // Absorbed attention over bf16 latents then runs with bf16 products, AMX tiles or vdpbf16ps (the one layer's
      // latent rows of 64 take them; the three layers' rows of 48 do not), which round its queries and probabilities
      // to bf16 (attention/latent_bf16_attention.h): 2^-8 relative, the size of the latent's own rounding, so the forms
      // differ by about what the cache's rounding does to the output, which bounds them (measured: 0.61x of it).
      const float rounding = test::worst_logit_difference(expanded, run(one_layer, MlaForm::kExpanded, KvDType::kF32));
      EXPECT_GT(test::worst_logit_difference(absorbed, expanded), kLogitBound) << "the bf16 kernel ran";
      EXPECT_LE(test::worst_logit_difference(absorbed, expanded), rounding) << what;
    } else {
      EXPECT_LE(test::worst_logit_difference(absorbed, expanded), kLogitBound) << what;
    }
    if (dtype == KvDType::kF32) {
      EXPECT_LE(test::worst_logit_difference(absorbed3, expanded3), kLogitBound) << what;
      EXPECT_GT(test::worst_logit_difference(absorbed3, expanded3), 0.0f) << "two different computations ran";
      continue;
    }
    // ... and the rounding does change the output (the comparison is not of two fp32 runs).
    const float rounding =
        test::worst_logit_difference(absorbed3, run(three_layers, MlaForm::kAbsorbed, KvDType::kF32));
    EXPECT_GT(rounding, 1e-3f) << what;
    EXPECT_LE(test::worst_logit_difference(absorbed3, expanded3), std::max(kLogitBound, 0.1f * rounding)) << what;
  }
}

// F16 weights are read exactly by both the engine and the reference (activations stay fp32): the same bound as f32,
// for every matrix kind (projections, the per-head k_b/v_b of the split form, stacked experts, routers in F32).
// Q8_0 weights take int8 activations in the SIMD kernels (~0.4% per value, as llama.cpp): the dense model with the
// split attn_k_b/attn_v_b (read as the file has them) rounds activations at 8 matrices a layer (2 more than a Llama
// layer: the queries into k_b and the attended latent into v_b); measured 3.2% of the logits' scale on avx512 and
// avx2 (a Llama model keeps within 3%: tests/engine/packed_weights_test), bound 5%; with experts the rounding can also
// swap two experts whose router scores are that close, an O(1) change the reference cannot follow, so only the run is
// checked. A file with one quantized attn_kv_b has its transposed k_b requantized to Q8_0 at load
// (KBuiltFromAQuantizedKvBIsItsTransposeInQ8_0).
TEST_F(Deepseek2, WeightTypesEqualTheReference) {
  for (const char* preset : {"tiny-deepseek2", "tiny-deepseek2-dense", "tiny-deepseek2-qlora"}) {
    for (MlaForm form : {MlaForm::kAbsorbed, MlaForm::kExpanded}) {
      load(preset, form, DType::kF16);
      const std::vector<TokenId> prompt = prompt_of(40);
      const std::string what = fmt::format("{} f16 form {}", preset, int(form));
      EXPECT_LE(against_reference(
                    prompt, trace({.max_batch_tokens = 16, .max_seqs = 1, .kv = {.block_size = 4}}, prompt), what),
                kLogitBound)
          << what;
    }
  }
  SynthSpec dense_split = *synth_preset("tiny-deepseek2-dense");
  dense_split.mla.split_kv_b = true;
  dense_split.type = DType::kQ8_0;
  load(dense_split, MlaForm::kAuto);
  auto file = gguf::File::open(path_);
  ASSERT_TRUE(file);
  testing::NaiveDeepseek2 reference(*file);
  const std::vector<TokenId> prompt = prompt_of(40);
  const test::EngineTrace t = trace({.max_batch_tokens = 16, .max_seqs = 1, .kv = {.block_size = 4}}, prompt);
  float worst = 0.0f, scale = 0.0f;
  for (size_t p = 0; p < prompt.size(); ++p) {
    const std::vector<float> want = reference.step(prompt[p]);
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(t.logits.at(p)[i] - want[i]));
      scale = std::max(scale, std::fabs(want[i]));
    }
  }
  // The scalar reference kernels dequantize the weights and keep fp32 activations: the fp32 bound.
  EXPECT_LE(worst, best_isa() == Isa::kScalar ? kLogitBound : 0.05f * scale);
  load("tiny-deepseek2-qlora", MlaForm::kAuto, DType::kQ8_0);
  EXPECT_EQ(trace({.max_batch_tokens = 16, .max_seqs = 1, .kv = {.block_size = 4}}, prompt).tokens.size(), 24u);
}

TEST_F(Deepseek2, BatchedEqualsAlone) {
  for (MlaForm form : {MlaForm::kAbsorbed, MlaForm::kExpanded, MlaForm::kAuto}) {
    load("tiny-deepseek2", form);
    // Alone the prompt is one chunk of 120 (auto: expanded); batched, its neighbours share the step budget.
    const EngineConfig config{.max_batch_tokens = 160, .max_seqs = 3, .kv = {.block_size = 4}};
    const std::vector<TokenId> prompt = prompt_of(120);
    const test::EngineTrace alone = trace(config, prompt);
    auto engine = Engine::create(*loaded_.model, *loaded_.tokenizer, pool_, with_form(config));
    ASSERT_TRUE(engine) << engine.status().message();
    test::EngineTrace batched;
    RequestParams a = test::greedy_request(prompt, 24);
    a.on_logits = [&](size_t position, std::span<const float> logits) {
      batched.logits[position].assign(logits.begin(), logits.end());
    };
    ASSERT_TRUE((*engine)->add_request(test::greedy_request(prompt_of(9, 5), 30), {}));
    ASSERT_TRUE((*engine)->add_request(std::move(a), [&](const RequestOutput& out) {
      batched.tokens.insert(batched.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
    }));
    ASSERT_TRUE((*engine)->add_request(test::greedy_request(prompt_of(70, 3), 20), {}));
    while ((*engine)->step()) {
    }
    EXPECT_EQ(batched.tokens, alone.tokens);
    // A fixed form computes each token's row alone (the kernels are batch-invariant). The automatic choice goes by
    // the tokens a sequence brings to a step, which its neighbours' share of the step budget changes: then the two
    // forms' rounding differs (the bound of the reference comparison).
    EXPECT_LE(test::worst_logit_difference(alone, batched), form == MlaForm::kAuto ? kLogitBound : 0.0f) << int(form);
  }
}

TEST_F(Deepseek2, PrefixHitEqualsMissAndPreemptionResumesExactly) {
  load("tiny-deepseek2");
  const std::vector<TokenId> system = prompt_of(45, 1);
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < 6; ++i) {
    std::vector<TokenId> p = system;
    for (TokenId t : prompt_of(6, i + 7)) p.push_back(t);
    requests.push_back(test::greedy_request(p, 40, false));
  }
  // A pool too small for all six at once: some are preempted and recomputed (or resumed from their cached blocks).
  const EngineConfig tight{.max_batch_tokens = 32, .max_seqs = 6, .kv = {.block_size = 4, .blocks = 40}};
  auto engine = Engine::create(*loaded_.model, *loaded_.tokenizer, pool_, tight);
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<std::vector<TokenId>> got(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE((*engine)->add_request(requests[i], [&, i](const RequestOutput& o) {
      got[i].insert(got[i].end(), o.new_tokens.begin(), o.new_tokens.end());
    }));
  }
  while ((*engine)->step()) {
    const Status s = (*engine)->kv().check_invariants();
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_GT(m.preemptions_total, 0u);
  EXPECT_GT(m.prefix_cache_hits_tokens_total, 0u);
  for (size_t i = 0; i < requests.size(); ++i) {
    const test::EngineTrace alone = trace({.max_seqs = 1, .kv = {.prefix_caching = false}}, requests[i].prompt, 40);
    EXPECT_EQ(got[i], alone.tokens) << "request " << i;
  }
}

TEST_F(Deepseek2, LatentCacheSizingEqualsTheAllocation) {
  load("tiny-deepseek2");
  const EngineConfig config{.max_seqs = 2, .kv = {.block_size = 16, .blocks = 10, .dtype = KvDType::kInt8}};
  auto engine = Engine::create(*loaded_.model, *loaded_.tokenizer, pool_, config);
  ASSERT_TRUE(engine) << engine.status().message();
  const KvCacheSpec spec = engine_kv_spec(*loaded_.model, config);
  EXPECT_TRUE(spec.mla);
  // Per block: 3 layers x 16 tokens x (32 + 16) int8 values, and per token and 32-value group an fp16 scale and min
  // (48 is not a multiple of 32: one group of 48 per row).
  const size_t per_block = 3 * (16 * 48 + 16 * 1 * 4);
  EXPECT_EQ(kv_bytes_per_block(spec).total(), per_block);
  EXPECT_EQ((*engine)->kv_storage_bytes(), 10 * per_block);
}

TEST(Deepseek2Routing, TopKByScoreTiesToTheLowerIndexThenNormalisedAndScaled) {
  MoeConfig moe{.num_experts = 6, .experts_used = 3, .normalize_weights = false, .weights_scale = 1.0f};
  std::vector<float> scores(6);
  std::vector<ExpertChoice> chosen(3);
  // Experts 1, 3 and 4 tie for the top; 0 and 5 tie below them.
  route_token(std::vector<float>{0.5f, 2.0f, -1.0f, 2.0f, 2.0f, 0.5f}, moe, scores, chosen);
  EXPECT_EQ(chosen[0].expert, 1u);
  EXPECT_EQ(chosen[1].expert, 3u);
  EXPECT_EQ(chosen[2].expert, 4u);
  const double z = 3 * std::exp(2.0) + 2 * std::exp(0.5) + std::exp(-1.0);
  EXPECT_NEAR(chosen[0].weight, std::exp(2.0) / z, 1e-6);
  route_token(std::vector<float>{0.5f, 3.0f, -1.0f, 2.0f, 0.0f, 0.5f}, moe, scores, chosen);
  EXPECT_EQ(chosen[2].expert, 0u) << "0 and 5 tie for third: the lower index";
  // Normalised to sum 1, then scaled.
  moe.normalize_weights = true;
  moe.weights_scale = 2.5f;
  route_token(std::vector<float>{0.5f, 3.0f, -1.0f, 2.0f, 0.0f, 0.5f}, moe, scores, chosen);
  EXPECT_NEAR(chosen[0].weight + chosen[1].weight + chosen[2].weight, 2.5, 1e-6);
  EXPECT_NEAR(chosen[0].weight / chosen[1].weight, std::exp(1.0), 1e-5);
  // Sigmoid gating scores each expert on its own.
  moe.gating = ExpertGating::kSigmoid;
  moe.normalize_weights = false;
  moe.weights_scale = 1.0f;
  route_token(std::vector<float>{0.5f, 3.0f, -1.0f, 2.0f, 0.0f, 0.5f}, moe, scores, chosen);
  EXPECT_NEAR(chosen[0].weight, 1.0 / (1.0 + std::exp(-3.0)), 1e-6);
}

TEST_F(Deepseek2, WindowsAndEvictionAreRefusedByName) {
  load("tiny-deepseek2");
  auto windowed = Engine::create(*loaded_.model, *loaded_.tokenizer, pool_, {.kv = {.window = 16}});
  ASSERT_FALSE(windowed);
  EXPECT_NE(windowed.status().message().find("MLA"), std::string::npos) << windowed.status().message();
  EngineConfig sinks;
  sinks.kv.policy = {.kind = KvPolicyKind::kSinks, .budget = 32};
  auto evicting = Engine::create(*loaded_.model, *loaded_.tokenizer, pool_, sinks);
  ASSERT_FALSE(evicting);
  EXPECT_NE(evicting.status().message().find("MLA"), std::string::npos) << evicting.status().message();
}

}  // namespace
}  // namespace kvs
