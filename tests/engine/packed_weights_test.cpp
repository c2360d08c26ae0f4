// Q8_0, Q4_0, Q4_K, Q5_K and Q6_K matrices repacked at load for the packed kernels, and F16 and BF16 matrices in float
// panels (WeightPacking::kForCpu), against the same file loaded as stored (kNone). Every packed matrix holds the file's
// values bit for bit (unpacked row by row), and the packed kernels sum the same exact block dots in another order, so
// the logits agree to fp32 noise
// (~1e-7 of their scale) and greedy decoding picks the same tokens, through prefill and decode.
// Except where an fp32 difference in a hidden state flips the int8 rounding of one activation (one step of its
// block's scale; both layouts quantize activations the same way): from that step on, the logits differ by up to
// ~1.2% of their scale (measured over seeds 4-10 and every type), and when the flip lands in the KV cache, every later
// step does too. How many flips a run meets depends on the seed and the ISA (the file-layout kernels sum in another
// order on each), so the bound on every step is the flip's, kFlipBound, 2.5x the largest measured (a packing or
// kernel bug moves logits by their own size), and generated tokens are compared wherever that step's difference
// proves one argmax. F16 and BF16 activations are never quantized to int8 (fp32, or bf16 the same way in both
// layouts), so no flip moves them: their logits stay within kFloatBound, fp32 reordering noise with a margin.
#include "tensor/packed_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "engine/sampler.h"
#include "engine_trace.h"
#include "model/synth.h"
#include "tensor/float_panels.h"
#include "test_support.h"

namespace kvs {
namespace {

// Rows of every kind: kv rows 32 (two groups of 16), ffn 160, and a vocabulary of 500, whose last group
// of output rows is partial; an odd number of blocks per row (dim 96: 3 blocks); a tied output.
// K-quant rows are whole super-blocks: dim 256, ffn 512 (kv rows 64, the partial last group of the vocabulary).
SynthSpec odd_spec(DType type) {
  if (is_k_quant(type)) {
    return SynthSpec{.layers = 2,
                     .dim = 256,
                     .heads = 4,
                     .kv_heads = 1,
                     .ffn = 512,
                     .vocab = 500,
                     .ctx = 256,
                     .type = type,
                     .seed = 4,
                     .rope_base = 10000.0f,
                     .tied_output = true};
  }
  return SynthSpec{.layers = 2,
                   .dim = 96,
                   .heads = 3,
                   .kv_heads = 1,
                   .ffn = 160,
                   .vocab = 500,
                   .ctx = 256,
                   .type = type,
                   .seed = type == DType::kQ8_0 ? uint64_t{3} : uint64_t{4},
                   .rope_base = 10000.0f,
                   .tied_output = true};
}

std::unique_ptr<DecoderModel> load(const std::string& path, WeightPacking packing) {
  auto model = DecoderModel::load(path, packing);
  EXPECT_TRUE(model) << model.status().message();
  return model ? std::move(model).value() : nullptr;
}

// The synthetic file of `type` loaded twice: packed for this CPU's kernels and as stored.
struct Twins {
  test::TempDir dir;
  std::unique_ptr<DecoderModel> packed, plain;
  Twins(DType type, const std::string& dir_prefix) : dir(dir_prefix + std::string(dtype_name(type))) {
    const std::string path = dir.file("m.gguf");
    EXPECT_TRUE(write_synth_model(odd_spec(type), path).is_ok());
    packed = load(path, WeightPacking::kForCpu);
    plain = load(path, WeightPacking::kNone);
  }
};

class PackedWeights : public ::testing::TestWithParam<DType> {};

TEST_P(PackedWeights, SameLogitsAndTokensAsTheFileLayout) {
  const DType type = GetParam();
  const std::optional<WeightLayout> layout = packed_layout_for(type);
  if (!layout) GTEST_SKIP() << "no packed kernel within this ISA limit: weights are never packed";
  const Twins twins(type, "packed_weights_");
  ASSERT_TRUE(twins.packed && twins.plain);
  const auto& packed = twins.packed;
  const auto& plain = twins.plain;
  EXPECT_TRUE(packed->weights().has_packed_matrices());
  EXPECT_FALSE(plain->weights().has_packed_matrices());
  EXPECT_EQ(packed->weights().layers[0].wq.layout, *layout);
  EXPECT_EQ(packed->weights().token_embedding.layout, WeightLayout::kRows);  // looked up by row
  // The packed bytes: the file's plus padding rows and header halves, well under 10% here.
  EXPECT_GE(packed->weights().matrix_bytes(), plain->weights().matrix_bytes());
  EXPECT_LE(packed->weights().matrix_bytes(), plain->weights().matrix_bytes() * 11 / 10);

  ThreadPool pool(2);
  auto tokenizer = Tokenizer::from_gguf(plain->file());
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  constexpr size_t kSteps = 24;
  const std::vector<TokenId> prompt = {1, 17, 42, 99, 7, 250};
  const RequestParams params = test::greedy_request(prompt, kSteps + 1);
  const test::EngineTrace a = test::trace_request(*packed, *tokenizer, pool, {.max_seqs = 1}, params);
  const test::EngineTrace b = test::trace_request(*plain, *tokenizer, pool, {.max_seqs = 1}, params);
  ASSERT_EQ(a.logits.size(), prompt.size() + kSteps);
  ASSERT_EQ(b.logits.size(), a.logits.size());
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  // Each position's largest logit difference, against the scale of the logits.
  const auto worst_at = [&](size_t position) {
    const std::vector<float>& la = a.logits.at(position);
    const std::vector<float>& lb = b.logits.at(position);
    float worst = 0.0f, scale = 0.0f;
    for (size_t i = 0; i < la.size(); ++i) {
      worst = std::max(worst, std::fabs(la[i] - lb[i]));
      scale = std::max(scale, std::fabs(lb[i]));
    }
    return std::pair{worst, scale};
  };
  constexpr float kFlipBound = 3e-2f, kFloatBound = 1e-4f;
  const float bound = float_panel_type(type) ? kFloatBound : kFlipBound;
  for (size_t position = 0; position + 1 < prompt.size(); ++position) {  // fed the same tokens in both runs
    const auto [worst, scale] = worst_at(position);
    EXPECT_LE(worst, bound * scale) << "prompt position " << position;
  }
  // Generated tokens: both runs are fed the same ones until a near tie, which may go either way.
  size_t agreed = 0;
  for (size_t step = 0; step < a.tokens.size(); ++step) {
    const size_t position = prompt.size() - 1 + step;
    const auto [worst, scale] = worst_at(position);
    EXPECT_LE(worst, bound * scale) << "position " << position;
    // Each logit within `worst` of the other run's: a top-2 margin above 2 worst leaves one argmax.
    std::vector<float> sorted = b.logits.at(position);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] <= 2 * worst) break;
    ASSERT_EQ(a.tokens[step], b.tokens[step]) << "step " << step;
    ++agreed;
  }
  EXPECT_GE(agreed, 1u);
}

// Loading packs every matrix but the embedding, and the packed bytes are the file's values: row by row, they
// unpack to the file's blocks.
TEST_P(PackedWeights, EveryMatrixHoldsTheFileValues) {
  const DType type = GetParam();
  if (!packed_layout_for(type)) GTEST_SKIP() << "no packed kernel within this ISA limit: weights are never packed";
  const Twins twins(type, "packed_values_");
  ASSERT_TRUE(twins.packed && twins.plain);
  const DecoderWeights &pw = twins.packed->weights(), &fw = twins.plain->weights();
  std::vector<std::pair<const WeightView*, const WeightView*>> matrices = {{&pw.output, &fw.output}};
  for (size_t l = 0; l < fw.layers.size(); ++l) {
    const DecoderLayerWeights &p = pw.layers[l], &f = fw.layers[l];
    for (auto [pm, fm] : {std::pair{&p.wq, &f.wq},
                          {&p.wk, &f.wk},
                          {&p.wv, &f.wv},
                          {&p.wo, &f.wo},
                          {&p.w_gate, &f.w_gate},
                          {&p.w_up, &f.w_up},
                          {&p.w_down, &f.w_down}}) {
      matrices.emplace_back(pm, fm);
    }
  }
  for (auto [pm, fm] : matrices) {
    ASSERT_EQ(pm->layout, *packed_layout_for(type));
    ASSERT_EQ(fm->layout, WeightLayout::kRows);
    ASSERT_EQ(pm->rows, fm->rows);
    std::vector<std::byte> row(fm->row_bytes());
    for (size_t r = 0; r < fm->rows; ++r) {
      unpack_row(*pm, r, row.data());
      ASSERT_EQ(std::memcmp(row.data(), fm->row(r), row.size()), 0) << "row " << r;
    }
  }
}

// F16 and BF16 in float panels through the engine: eight requests in one batch (prefill chunks of several requests
// in one matmul, decode steps of 8 tokens) give every request the logits it gets alone, bit for bit: the panel
// kernels' sum depends on the row and the token only.
TEST(FloatPanelWeights, BatchedLogitsEqualAloneBitForBit) {
  for (DType type : {DType::kF16, DType::kBF16}) {
    if (!packed_layout_for(type)) GTEST_SKIP() << "no panel kernel within this ISA limit: weights are never packed";
    const Twins twins(type, "panel_batch_");
    ASSERT_TRUE(twins.packed);
    const DecoderModel& model = *twins.packed;
    ASSERT_EQ(model.weights().layers[0].w_down.layout, *packed_layout_for(type));
    auto tokenizer = Tokenizer::from_gguf(model.file());
    ASSERT_TRUE(tokenizer) << tokenizer.status().message();
    ThreadPool pool(2);
    std::vector<RequestParams> requests;
    for (size_t i = 0; i < 8; ++i) {
      std::vector<TokenId> prompt;
      for (size_t k = 0; k < 3 + 5 * i; ++k) prompt.push_back(static_cast<TokenId>(1 + (37 * i + 11 * k) % 499));
      requests.push_back(test::greedy_request(prompt, 6 + i));
    }
    std::vector<test::EngineTrace> alone;
    for (const RequestParams& r : requests) alone.push_back(test::trace_request(model, *tokenizer, pool, {}, r));
    auto engine = Engine::create(model, *tokenizer, pool, {.max_batch_tokens = 64, .max_seqs = 8});
    ASSERT_TRUE(engine) << engine.status().message();
    std::vector<std::map<size_t, std::vector<float>>> together(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      RequestParams r = requests[i];
      r.on_logits = [&together, i](size_t position, std::span<const float> logits) {
        together[i][position].assign(logits.begin(), logits.end());
      };
      ASSERT_TRUE((*engine)->add_request(std::move(r), [](const RequestOutput&) {}));
    }
    while ((*engine)->has_work()) (*engine)->step();
    for (size_t i = 0; i < requests.size(); ++i) {
      // A logits row for every prompt position and every generated token but the last.
      ASSERT_EQ(alone[i].logits.size(), requests[i].prompt.size() + requests[i].max_new_tokens - 1);
      ASSERT_EQ(together[i].size(), alone[i].logits.size()) << dtype_name(type) << " request " << i;
      for (const auto& [position, logits] : alone[i].logits) {
        const std::vector<float>& batched = together[i].at(position);
        ASSERT_EQ(batched.size(), logits.size());
        EXPECT_EQ(std::memcmp(batched.data(), logits.data(), logits.size() * sizeof(float)), 0)
            << dtype_name(type) << " request " << i << " position " << position;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PackedWeights,
                         ::testing::Values(DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                                           DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace kvs
