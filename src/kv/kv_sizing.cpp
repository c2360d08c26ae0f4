#include "kv/kv_sizing.h"

#include <algorithm>

namespace kvs {

KvBlockBytes kv_bytes_per_block(const KvCacheSpec& s) {
  const KvFormat format = kv_format(s);
  return {.data = format.data_bytes_per_block(), .scales = format.scales_bytes_per_block()};
}

size_t kv_blocks_for_tokens(size_t tokens, size_t block_size) { return (tokens + block_size - 1) / block_size; }

size_t kv_key_tail_bytes(const KvCacheSpec& s) { return kv_format(s).key_tail_bytes(); }

size_t kv_key_tails_for_sequences(const KvCacheSpec& s, size_t seqs) {
  return kv_format(s).has_key_tails() ? kKeyTailsPerSequence * seqs : 0;
}

size_t kv_bytes_for_sequences(const KvCacheSpec& s, size_t tokens, size_t seqs, size_t window) {
  return seqs * kv_bytes_held(s, window, tokens) + kv_key_tails_for_sequences(s, seqs) * kv_key_tail_bytes(s);
}

double kv_bytes_per_token(const KvCacheSpec& s) {
  return static_cast<double>(kv_bytes_per_block(s).total()) / static_cast<double>(s.block_size);
}

size_t kv_blocks_in_budget(const KvCacheSpec& s, size_t budget, size_t num_key_tails) {
  const size_t tails = num_key_tails * kv_key_tail_bytes(s);
  return tails >= budget ? 0 : (budget - tails) / kv_bytes_per_block(s).total();
}

size_t kv_max_seqs_in_budget(const KvCacheSpec& s, size_t tokens, size_t budget) {
  const size_t per_seq = kv_bytes_for_sequences(s, tokens, 1);
  return per_seq == 0 ? 0 : budget / per_seq;
}

size_t kv_blocks_held(size_t tokens, size_t block_size, size_t window) {
  const size_t written = kv_blocks_for_tokens(tokens, block_size);
  const size_t first_read = window > 0 && tokens + 1 > window ? tokens + 1 - window : 0;
  return written - std::min(written, first_read / block_size);
}

size_t kv_bytes_held(const KvCacheSpec& spec, size_t window, size_t tokens) {
  return kv_blocks_held(tokens, spec.block_size, window) * kv_bytes_per_block(spec).total();
}

size_t kv_max_blocks_per_sequence(size_t block_size, size_t window, size_t tokens, size_t chunk) {
  const size_t whole = kv_blocks_for_tokens(tokens, block_size);
  if (window == 0) return whole;
  return std::min(whole, kv_blocks_for_tokens(window - 1 + std::min(chunk, tokens), block_size) + 1);
}

}  // namespace kvs
