// Tensor parallelism over N ranks (Megatron-style): rank r holds
//   query heads   [q_first, q_first + q_heads)        of the H query heads (H / N each)
//   KV heads      [kv_first, kv_first + kv_heads)     K/N each; with N > K heads each KV head is replicated on
//                                                      N / K ranks, the one its query heads read (as vLLM does)
//   FFN columns   [ffn_first, ffn_first + ffn)         of the gate/up rows and the down matrix's columns
//   vocabulary    [vocab_first, vocab_first + vocab)   of the output matrix's rows (uneven when N does not divide it)
// Q/K/V and gate/up are column-parallel (a rank's rows of the matrix), the attention output and down projections
// row-parallel (a rank's columns), each followed by an all-reduce of the residual update; the embedding and the
// norms are replicated; each rank's logits slice is gathered to rank 0.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "model/model_config.h"

namespace kvs {

struct TensorShard {
  size_t rank = 0;
  size_t size = 1;
  bool sharded() const { return size > 1; }
};

struct ShardRanges {
  size_t q_first = 0, q_heads = 0;
  size_t kv_first = 0, kv_heads = 0;
  size_t ffn_first = 0, ffn = 0;
  size_t vocab_first = 0, vocab = 0;
  size_t kv_replicas = 1;  // ranks holding each KV head
};

// The KV heads each of `ranks` ranks holds: kv_heads / ranks, or 1 when there are more ranks than heads (each
// head then on ranks / kv_heads ranks); an error when neither divides (the message names both).
Expected<size_t> kv_heads_per_rank(size_t kv_heads, size_t ranks);

// Rank `shard.rank`'s ranges of a model of `config`, or why the model does not split into `shard.size` (heads,
// KV heads or FFN columns that do not divide; an architecture not supported: messages name the values).
Expected<ShardRanges> shard_ranges(const ModelConfig& config, TensorShard shard);
// The config a rank's forward pass computes with: its own query heads, KV heads and FFN columns (dim, layers,
// vocabulary and the rest as the model's).
ModelConfig shard_config(const ModelConfig& config, const ShardRanges& ranges);
// "rank 1 of 2: query heads 4-7, KV heads 2-3, FFN columns 344-687, vocabulary 16000-31999".
std::string describe(const ShardRanges& ranges, TensorShard shard);

}  // namespace kvs
