// MLA's absorbed attention over bf16 latents with bf16 products, on AMX-BF16 tiles or with vdpbf16ps
// (tensor/latent_partial.h): every query head of a token against its sequence's one latent row per slot, the slots
// cut into runs that the pool's threads take, each run read once (scores, running softmax and values of 32 slots while
// they are in L1), the runs merged per token. A batch of fewer tokens than threads splits each token's slots, so that
// at batch 1 each thread reads its share of the latent once (the fp32 path, BatchAttention, splits the heads instead:
// each thread reads every latent twice).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "attention/attention_batch.h"
#include "attention/paged_attention.h"
#include "core/aligned_buffer.h"
#include "core/thread_pool.h"
#include "kv/kv_storage.h"
#include "tensor/latent_partial.h"

namespace kvs {

class LatentBf16Attention {
 public:
  // shape: one KV head (the latent) of head_dim == value width, read whole as key and value. kernel: the bf16
  // kernel to run (usable on this CPU), or none (then applies() is always false).
  LatentBf16Attention(ThreadPool& pool, const AttentionShape& shape,
                      std::optional<LatentKernel> kernel = best_latent_kernel());

  // run() takes this batch: a kernel is set, the cache is an MLA latent of bf16 rows a multiple of 32 wide,
  // unrotated, and nothing asks for what only the general path does (a window, slot mass).
  bool applies(const KvStorage& kv, const AttentionBatch& batch, size_t window) const;

  // q: [n][num_heads * head_dim], out: [n][num_heads * head_dim], as BatchAttention::run.
  void run(const KvStorage& kv, size_t layer, const AttentionBatch& batch, std::span<const float> q,
           std::span<float> out);

 private:
  ThreadPool& pool_;
  AttentionShape shape_;
  std::optional<LatentKernel> kernel_;
  std::vector<Bf16LatentPartial> runs_;         // [token][part] when a token has parts, else [thread]
  std::vector<AlignedBuffer<uint16_t>> stage_;  // per thread: 32 rows gathered across blocks, zero-padded
  std::vector<const Bf16LatentPartial*> merging_;
};

}  // namespace kvs
