// Every weight type the CPU loads, on the GPU (lavapipe here) through the engine:
//  - each type in a synthetic file (dim 256; an FFN of 640, so the down projection's rows are not whole
//    super-blocks and fall back as llama.cpp's quantizer does) against the CPU's scalar path, which dequantizes the
//    rows and multiplies with fp32 activations as the shaders do: both are fp32 sums of the same products in other
//    orders, so the golden bound (1e-4 on the logits) holds and the greedy tokens are the same;
//  - the trained stories260K converted to Q4_K_M (its width 64 falls back to Q5_0/Q8_0 as llama.cpp's files do), Q4_0
//    and Q8_0, teacher-forced over real text: top-1 agreement with the CPU's scalar path at least 99% and the
//    perplexity within 0.5% of the CPU's fastest path (issue 41's bounds for quantized weights). Against the fast
//    path's top-1 the GPU agrees as often as the fast path agrees with the scalar one (its int8 activations move a few
//    near ties of this 260K-parameter model: measured 195-200 of 200);
//  - a matrix split over bindings (parts of whole rows, as lavapipe needs for a large classifier) giving the bits of
//    the unsplit one, and --profile counting the dispatches a step records.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "cli/run_kvserve.h"
#include "engine/engine_trace.h"
#include "eval/perplexity.h"
#include "gpu/gpu_model.h"
#include "gpu_test_fixture.h"
#include "model/synth.h"
#include "tensor/isa.h"
#include "test_support.h"

namespace kvs {
namespace {

constexpr float kGoldenBound = 1e-4f;

struct Loaded {
  std::unique_ptr<DecoderModel> host;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Model> gpu;
};

Loaded load(const std::string& path, GpuModelOptions options = {}) {
  Loaded l;
  auto model = DecoderModel::load(path, WeightPacking::kNone);
  EXPECT_TRUE(model) << model.status().message();
  if (!model) return l;
  l.host = std::move(model).value();
  l.tokenizer = std::make_unique<Tokenizer>(std::move(Tokenizer::from_gguf(l.host->file())).value());
  auto gpu = make_gpu_model(*l.host, 0, options);
  EXPECT_TRUE(gpu) << gpu.status().message();
  if (gpu) l.gpu = std::move(gpu).value();
  return l;
}

class GpuWeightTypes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = test::vulkan_missing(); !why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override { set_isa_limit(saved_isa_); }
  test::EngineTrace trace(const Model& model, const Tokenizer& tokenizer, const std::vector<TokenId>& prompt,
                          size_t n) {
    return test::trace_request(model, tokenizer, pool_, {.max_batch_tokens = 16, .max_seqs = 1},
                               test::greedy_request(prompt, n));
  }
  ThreadPool pool_{2};
  Isa saved_isa_ = isa_limit();
};

TEST_F(GpuWeightTypes, EveryTypeGivesTheCpusScalarLogits) {
  set_isa_limit(Isa::kScalar);  // the CPU's dequantize-and-fp32 path: the shaders' arithmetic
  test::TempDir dir("gpu_weight_types");
  // (type, llama.cpp's _M recipe)
  const std::vector<std::pair<DType, bool>> types{
      {DType::kBF16, false}, {DType::kQ4_0, false},   {DType::kQ4_1, false},   {DType::kQ5_0, false},
      {DType::kQ5_1, false}, {DType::kIQ4_NL, false}, {DType::kIQ4_XS, false}, {DType::kQ2_K, false},
      {DType::kQ3_K, false}, {DType::kQ4_K, false},   {DType::kQ5_K, false},   {DType::kQ6_K, false},
      {DType::kQ4_K, true},  {DType::kQ5_K, true}};
  for (const auto& [type, mixed] : types) {
    const std::string name = std::string(dtype_name(type)) + (mixed ? "_m" : "");
    SynthSpec spec{.layers = 2, .dim = 256, .heads = 4, .kv_heads = 2, .ffn = 640, .vocab = 512, .ctx = 128};
    spec.type = type;
    spec.mixed_k = mixed;
    const std::string path = dir.file(name + ".gguf");
    ASSERT_TRUE(write_synth_model(spec, path)) << name;
    Loaded m = load(path);
    ASSERT_TRUE(m.gpu) << name;
    const std::vector<TokenId> prompt = test::varied_prompt(20, 5);
    const test::EngineTrace cpu = trace(*m.host, *m.tokenizer, prompt, 8);
    const test::EngineTrace gpu = trace(*m.gpu, *m.tokenizer, prompt, 8);
    EXPECT_EQ(gpu.tokens, cpu.tokens) << name;
    EXPECT_LE(test::worst_logit_difference(gpu, cpu), kGoldenBound) << name;
  }
}

// Logits after every token of `prompt` (teacher-forced: the prompt is the text), in position order.
std::vector<std::vector<float>> prompt_logits(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                                              const std::vector<TokenId>& prompt) {
  const test::EngineTrace t = test::trace_request(model, tokenizer, pool, {.max_batch_tokens = 64, .max_seqs = 1},
                                                  test::greedy_request(prompt, 1));
  std::vector<std::vector<float>> rows;
  for (const auto& [position, row] : t.logits) rows.push_back(row);
  return rows;
}

TEST_F(GpuWeightTypes, QuantizedStories260KAgreesWithTheCpuTeacherForced) {
  test::TempDir dir("gpu_weight_types_trained");
  std::ifstream in(test::shared_path("eval/tinystories_valid_head.txt"));
  std::stringstream text;
  text << in.rdbuf();
  for (const char* name : {"q4_k_m", "q4_0", "q8_0"}) {
    const std::string path = dir.file(std::string(name) + ".gguf");
    const test::KvserveResult converted = test::run_kvserve(
        {"convert", "--llama2c", test::shared_path("models/stories260K/stories260K.bin"), "--tokenizer",
         test::shared_path("models/stories260K/tok512.bin"), "-o", path, "--type", name},
        dir);
    ASSERT_EQ(converted.exit_code, 0) << converted.err;
    Loaded m = load(path);
    ASSERT_TRUE(m.gpu) << name;
    // Top-1 agreement after each of 200 tokens of real text, against the CPU's fast path (its activations rounded
    // to int8 blocks) and its scalar path (fp32 activations, the shaders' arithmetic).
    std::vector<TokenId> prompt = m.tokenizer->encode(text.str().substr(0, 2000), true);
    prompt.resize(std::min<size_t>(prompt.size(), 200));
    const auto gpu = prompt_logits(*m.gpu, *m.tokenizer, pool_, prompt);
    const auto fast = prompt_logits(*m.host, *m.tokenizer, pool_, prompt);
    set_isa_limit(Isa::kScalar);
    const auto scalar = prompt_logits(*m.host, *m.tokenizer, pool_, prompt);
    set_isa_limit(saved_isa_);
    ASSERT_GE(gpu.size(), prompt.size()) << name << ": a row after every prompt token";
    ASSERT_EQ(fast.size(), gpu.size()) << name;
    ASSERT_EQ(scalar.size(), gpu.size()) << name;
    const auto top1 = [](const std::vector<float>& row) {
      return std::max_element(row.begin(), row.end()) - row.begin();
    };
    size_t with_scalar = 0, with_fast = 0, fast_with_scalar = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      with_scalar += top1(gpu[i]) == top1(scalar[i]);
      with_fast += top1(gpu[i]) == top1(fast[i]);
      fast_with_scalar += top1(fast[i]) == top1(scalar[i]);
    }
    const double n = static_cast<double>(gpu.size());
    EXPECT_GE(with_scalar / n, 0.99) << name << ": " << with_scalar << " of " << gpu.size();
    // Against the fast path, whatever the int8 activations themselves move (near ties of this 260K model).
    EXPECT_GE(with_fast / n, std::min(0.99, fast_with_scalar / n - 0.01))
        << name << ": " << with_fast << " of " << gpu.size() << " (fast and scalar CPU paths: " << fast_with_scalar
        << ")";
    std::printf("%s teacher-forced top-1: GPU/CPU scalar %zu, GPU/CPU int8 %zu, CPU int8/scalar %zu of %zu\n", name,
                with_scalar, with_fast, fast_with_scalar, gpu.size());
    // Perplexity, the protocol of `kvserve perplexity` (chunks of 128 from an empty cache).
    const PerplexityOptions options{.chunk_tokens = 128, .max_chunks = 3};
    auto on_cpu = evaluate_perplexity(*m.host, *m.tokenizer, pool_, text.str(), options);
    auto on_gpu = evaluate_perplexity(*m.gpu, *m.tokenizer, pool_, text.str(), options);
    ASSERT_TRUE(on_cpu && on_gpu) << name;
    EXPECT_NEAR(on_gpu->perplexity / on_cpu->perplexity, 1.0, 0.005) << name;
    std::printf("%s perplexity: GPU %.5f, CPU %.5f\n", name, on_gpu->perplexity, on_cpu->perplexity);
  }
}

// One part per few rows (a binding of 4 KiB): the products and the embedding rows land where the whole matrix puts
// them, the same bits; the profile counts every dispatch of the steps it saw.
TEST_F(GpuWeightTypes, MatricesSplitOverBindingsGiveTheSameBitsAndTheProfileCountsEveryDispatch) {
  Loaded whole = load(test::default_model_path());
  Loaded split = load(test::default_model_path(), {.profile = true, .max_binding_bytes = 4096});
  ASSERT_TRUE(whole.gpu && split.gpu);
  const std::vector<TokenId> prompt = test::varied_prompt(9, 3);
  const test::EngineTrace a = trace(*whole.gpu, *whole.tokenizer, prompt, 6);
  const test::EngineTrace b = trace(*split.gpu, *split.tokenizer, prompt, 6);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(test::worst_logit_difference(a, b), 0.0f);
  uint64_t steps = 0;
  const std::vector<GpuKernelTime> kinds = gpu_profile(*split.gpu, &steps);
  EXPECT_EQ(steps, 6u) << "one prefill step and five decode steps";
  const ModelConfig& c = split.host->config();
  for (const GpuKernelTime& k : kinds) {
    EXPECT_GT(k.seconds, 0.0) << k.kind;
    if (k.kind == "paged_attention") {
      EXPECT_EQ(k.dispatches, steps * c.num_layers);
    }
    if (k.kind == "rmsnorm") {
      EXPECT_EQ(k.dispatches, steps * (2 * c.num_layers + 1));
    }
  }
  EXPECT_TRUE(gpu_profile(*whole.gpu).empty()) << "no profile without --profile";
}

}  // namespace
}  // namespace kvs
