// The default model (stories260K, converted at build time) with its tokenizer and a 2-thread pool:
// what the engine-level tests run on.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "model/decoder_model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace kvs::test {

struct DefaultModel {
  std::unique_ptr<DecoderModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ThreadPool pool{2};

  DefaultModel() {
    auto m = DecoderModel::load(default_model_path());
    EXPECT_TRUE(m) << m.status().message();
    model = std::move(m).value();
    auto t = Tokenizer::from_gguf(model->file());
    EXPECT_TRUE(t) << t.status().message();
    tokenizer = std::make_unique<Tokenizer>(std::move(t).value());
  }

  // `n` ids drawn from `seed`: ordinary tokens (no BOS, EOS or unknown).
  std::vector<TokenId> random_tokens(size_t n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::vector<TokenId> out;
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<TokenId>(3 + rng() % (model->config().vocab_size - 3)));
    return out;
  }
};

}  // namespace kvs::test
