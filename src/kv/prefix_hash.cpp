#include "kv/prefix_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <string>

namespace kvs {
namespace {

BlockHash from_xxh(XXH128_hash_t h) { return {.low = h.low64, .high = h.high64}; }

}  // namespace

BlockHash prefix_root_hash(std::string_view model_identity, std::string_view cache_salt) {
  // Lengths first, so that ("ab", "c") and ("a", "bc") differ.
  std::string key = "kvserve-prefix-v1";
  const uint64_t lengths[2] = {model_identity.size(), cache_salt.size()};
  key.append(reinterpret_cast<const char*>(lengths), sizeof(lengths));
  key.append(model_identity).append(cache_salt);
  return from_xxh(XXH3_128bits(key.data(), key.size()));
}

BlockHash chain_block_hash(const BlockHash& parent, std::span<const TokenId> tokens) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  const uint64_t halves[2] = {parent.low, parent.high};
  XXH3_128bits_update(&state, halves, sizeof(halves));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  return from_xxh(XXH3_128bits_digest(&state));
}

}  // namespace kvs
