// A quantized model file against its F32 twin: every tensor the dequantized values of the quantized file, with the
// same metadata, so both compute with the same weights and any difference is the arithmetic (int8 activations, the
// order of sums). One greedy request through both; the logits of the prompt's positions (fed the same tokens) and
// the generated tokens wherever the twin's choice is clear.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "engine_trace.h"
#include "gguf/gguf.h"
#include "tensor/convert.h"
#include "test_support.h"

namespace kvs::test {

// Every tensor of `path` dequantized to F32, with the same metadata.
inline void write_f32_twin(const std::string& path, const std::string& twin) {
  auto file = gguf::File::open(path);
  ASSERT_TRUE(file) << file.status().message();
  gguf::Writer w;
  for (const auto& [key, value] : file->metadata()) w.set(key, value);
  w.set_u32("general.file_type", 0);
  for (const gguf::TensorInfo& t : file->tensors()) {
    const size_t cols = t.dims[0], rows = t.num_elements() / cols, row_bytes = dtype_row_bytes(t.type, cols);
    std::vector<std::byte> bytes(t.num_elements() * sizeof(float));
    for (size_t r = 0; r < rows; ++r) {
      dequantize_row(t.type, t.data.data() + r * row_bytes, reinterpret_cast<float*>(bytes.data()) + r * cols, cols);
    }
    ASSERT_TRUE(w.add_tensor(t.name, DType::kF32, t.dims, std::move(bytes)));
  }
  ASSERT_TRUE(w.write(twin));
}

struct TwinComparison {
  float worst = 0.0f;              // the largest logit difference over the prompt's positions
  std::vector<TokenId> got, want;  // the greedy tokens of the file and of its twin
  size_t agreed = 0;  // generated tokens chosen alike, where the twin's top two are over 2 x tie_margin apart,
                      // before the runs part
};

// A greedy request of `generate` tokens after `prompt` through the model at `path` and through its twin (written
// beside it).
inline TwinComparison compare_with_f32_twin(const std::string& path, const std::vector<TokenId>& prompt,
                                            size_t generate, float tie_margin) {
  TwinComparison c;
  const std::string twin = path + ".f32.gguf";
  write_f32_twin(path, twin);
  const LoadedModel q = load_model(path), f = load_model(twin);
  EXPECT_TRUE(q.model && f.model);
  if (!q.model || !f.model) return c;
  ThreadPool pool(2);
  const EngineConfig config{.max_batch_tokens = 7, .max_seqs = 1, .kv = {.block_size = 8}};
  const EngineTrace got = trace_request(*q.model, *q.tokenizer, pool, config, greedy_request(prompt, generate));
  const EngineTrace want = trace_request(*f.model, *f.tokenizer, pool, config, greedy_request(prompt, generate));
  EXPECT_EQ(got.tokens.size(), generate);
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    for (size_t i = 0; i < got.logits.at(p).size(); ++i)
      c.worst = std::max(c.worst, std::fabs(got.logits.at(p)[i] - want.logits.at(p)[i]));
  }
  c.got = got.tokens;
  c.want = want.tokens;
  // Both runs are fed the same tokens as long as their choices agree: a differing choice must be at a near tie of
  // the twin (after it the runs are fed other tokens); clear choices before it are counted.
  for (size_t i = 0; i < got.tokens.size(); ++i) {
    std::vector<float> sorted = want.logits.at(prompt.size() - 1 + i);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    const bool near_tie = sorted[0] - sorted[1] <= 2 * tie_margin;
    if (got.tokens[i] != want.tokens[i]) {
      EXPECT_TRUE(near_tie) << "generated token " << i << ": the twin's choice is clear (" << sorted[0] - sorted[1]
                            << " apart), yet the file chose another";
      break;
    }
    c.agreed += !near_tie;
  }
  return c;
}

}  // namespace kvs::test
