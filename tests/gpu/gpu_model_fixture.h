// The fixture of the GPU tests that run a model through the engine: a GGUF file loaded on the host and on Vulkan
// device 0, its tokenizer and a thread pool, or the test skipped with the reason there is no device.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine_trace.h"
#include "gpu/gpu_model.h"
#include "gpu_test_fixture.h"
#include "model/decoder_model.h"

namespace kvs::test {

class GpuModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = vulkan_missing(); !why.empty()) GTEST_SKIP() << why;
  }
  // `path` loaded in the file's layout, and on device 0.
  void load(const std::string& path) {
    auto model = DecoderModel::load(path, WeightPacking::kNone);
    ASSERT_TRUE(model) << model.status().message();
    host_ = std::move(model).value();
    auto tokenizer = Tokenizer::from_gguf(host_->file());
    ASSERT_TRUE(tokenizer) << tokenizer.status().message();
    tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer).value());
    auto gpu = make_gpu_model(*host_, 0);
    ASSERT_TRUE(gpu) << gpu.status().message();
    gpu_ = std::move(gpu).value();
  }
  EngineTrace trace(const Model& model, const EngineConfig& config, const std::vector<TokenId>& prompt, size_t n) {
    return trace_request(model, *tokenizer_, pool_, config, greedy_request(prompt, n));
  }

  std::unique_ptr<DecoderModel> host_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Model> gpu_;
  ThreadPool pool_{2};
};

}  // namespace kvs::test
