#include "model/tensor_shard.h"

#include <fmt/format.h>

namespace kvs {

Expected<size_t> kv_heads_per_rank(size_t kv_heads, size_t ranks) {
  if (kv_heads >= ranks ? kv_heads % ranks != 0 : ranks % kv_heads != 0) {
    return Status::invalid_argument(fmt::format(
        "--tp {}: the model's {} KV heads neither split evenly into {} ranks nor replicate evenly over them", ranks,
        kv_heads, ranks));
  }
  return kv_heads >= ranks ? kv_heads / ranks : 1;
}

Expected<ShardRanges> shard_ranges(const ModelConfig& c, TensorShard s) {
  const size_t n = s.size, r = s.rank;
  if (n == 0 || r >= n) return Status::invalid_argument(fmt::format("rank {} of a tensor-parallel group of {}", r, n));
  ShardRanges out;
  out.vocab_first = c.vocab_size * r / n;
  out.vocab = c.vocab_size * (r + 1) / n - out.vocab_first;
  if (n == 1) {
    out.q_heads = c.num_heads;
    out.kv_heads = c.num_kv_heads;
    out.ffn = c.ffn_dim;
    return out;
  }
  if (c.is_mla() || c.is_gemma3() || c.moe.num_experts > 0) {
    return Status::unimplemented(fmt::format(
        "tensor parallelism (--tp {}) splits Llama-family models (llama, mistral, qwen2); {} is not supported yet", n,
        c.architecture));
  }
  if (c.num_heads % n != 0) {
    return Status::invalid_argument(
        fmt::format("--tp {}: the model's {} query heads do not split evenly into {} ranks", n, c.num_heads, n));
  }
  auto kv_heads = kv_heads_per_rank(c.num_kv_heads, n);
  if (!kv_heads) return kv_heads.status();
  if (c.ffn_dim % n != 0) {
    return Status::invalid_argument(
        fmt::format("--tp {}: the model's FFN width {} does not split evenly into {} ranks", n, c.ffn_dim, n));
  }
  out.q_heads = c.num_heads / n;
  out.q_first = r * out.q_heads;
  out.kv_heads = *kv_heads;
  if (c.num_kv_heads >= n) {
    out.kv_first = r * out.kv_heads;
  } else {  // each rank's query heads read one KV head, held by n / K ranks
    out.kv_first = out.q_first / c.group_size();
    out.kv_replicas = n / c.num_kv_heads;
  }
  out.ffn = c.ffn_dim / n;
  out.ffn_first = r * out.ffn;
  return out;
}

ModelConfig shard_config(const ModelConfig& c, const ShardRanges& ranges) {
  ModelConfig local = c;
  local.num_heads = ranges.q_heads;
  local.num_kv_heads = ranges.kv_heads;
  local.ffn_dim = ranges.ffn;
  return local;
}

std::string describe(const ShardRanges& g, TensorShard s) {
  return fmt::format("rank {} of {}: query heads {}-{}, KV heads {}-{}{}, FFN columns {}-{}, vocabulary {}-{}", s.rank,
                     s.size, g.q_first, g.q_first + g.q_heads - 1, g.kv_first, g.kv_first + g.kv_heads - 1,
                     g.kv_replicas > 1 ? fmt::format(" (each on {} ranks)", g.kv_replicas) : "", g.ffn_first,
                     g.ffn_first + g.ffn - 1, g.vocab_first, g.vocab_first + g.vocab - 1);
}

}  // namespace kvs
