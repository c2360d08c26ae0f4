#include "kv/kv_sizing.h"

namespace kvs {

KvBlockBytes kv_bytes_per_block(const KvCacheSpec& s) {
  const KvFormat format = kv_format(s);
  return {.data = format.data_bytes_per_block(), .scales = format.scales_bytes_per_block()};
}

size_t kv_blocks_for_tokens(size_t tokens, size_t block_size) { return (tokens + block_size - 1) / block_size; }

size_t kv_bytes_for_sequences(const KvCacheSpec& s, size_t tokens, size_t seqs) {
  return seqs * kv_blocks_for_tokens(tokens, s.block_size) * kv_bytes_per_block(s).total();
}

double kv_bytes_per_token(const KvCacheSpec& s) {
  return static_cast<double>(kv_bytes_per_block(s).total()) / static_cast<double>(s.block_size);
}

size_t kv_blocks_in_budget(const KvCacheSpec& s, size_t budget) { return budget / kv_bytes_per_block(s).total(); }

size_t kv_max_seqs_in_budget(const KvCacheSpec& s, size_t tokens, size_t budget) {
  const size_t per_seq = kv_bytes_for_sequences(s, tokens, 1);
  return per_seq == 0 ? 0 : budget / per_seq;
}

}  // namespace kvs
