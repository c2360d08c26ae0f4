// Offload tiers below the KV pool: when the pool evicts an idle cached block its bytes move down to a
// larger, slower tier instead of being lost, and a prefix lookup that misses the pool but hits a tier
// loads them back instead of recomputing them (kv/tiers/kv_tier_stack.h orders the tiers).
//
// A tier keeps whole full blocks (kv_storage.h's block buffer) under a key of the block's chained hash
// (kv/prefix_hash.h: the model identity and the cache salt are in its root, the tokens of the block and
// of every block before it in the chain) and the KV format's fingerprint (element types, widths,
// block size: what the bytes mean). Beside the bytes it keeps the block's tokens, and a hit is
// confirmed by them, as the prefix index confirms its own: never by the hash alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/kv_cache_spec.h"
#include "kv/prefix_hash.h"

namespace kvs {

struct TierBlockKey {
  BlockHash hash;
  uint64_t format = 0;  // TierFormat::fingerprint
  bool operator==(const TierBlockKey&) const = default;
};

struct TierBlockKeyHash {
  size_t operator()(const TierBlockKey& k) const { return k.hash.low ^ (k.format * 0x9E3779B97F4A7C15ull); }
};

// What the bytes of a block are: a fingerprint of the layout, a line naming it (written into block
// files, for people), and the bytes of one block.
struct TierFormat {
  uint64_t fingerprint = 0;
  std::string description;
  size_t block_bytes = 0;
};
// The format of blocks of a pool of `spec` (valid): every field kv_format() reads is in the fingerprint.
TierFormat tier_format(const KvCacheSpec& spec);

struct TierStats {
  size_t capacity_bytes = 0;
  size_t bytes_held = 0;
  size_t blocks_held = 0;
  uint64_t hits = 0;            // lookups that found the block (confirmed by its tokens)
  uint64_t stores = 0;          // blocks written into the tier
  uint64_t bytes_stored = 0;    // bytes moved into the tier
  uint64_t loads = 0;           // blocks read back out
  uint64_t bytes_loaded = 0;    // bytes moved out of the tier
  uint64_t rejected = 0;        // stores that could not be kept (no room, an I/O error, a full disk)
  uint64_t load_failures = 0;   // loads that failed (I/O error, short read, bad checksum): the block is dropped
  uint64_t evictions = 0;       // blocks dropped to make room
  double load_seconds_sum = 0;  // time spent loading, over `loads` (and the failures)
};

// One tier. Not thread-safe unless an implementation says so.
class KvTier {
 public:
  virtual ~KvTier() = default;
  virtual std::string_view name() const = 0;
  // Keeps a copy of one block (bytes of its format's block_bytes), dropping the least recently used to
  // make room. A block that cannot be kept is not an error the caller acts on: the tier counts it
  // (rejected) and the status says why.
  virtual Status store(const TierBlockKey& key, std::span<const TokenId> tokens, std::span<const std::byte> bytes) = 0;
  // Whether the tier holds the block under `key` with exactly these tokens.
  virtual bool contains(const TierBlockKey& key, std::span<const TokenId> tokens) const = 0;
  // Copies the block's bytes into `out` (its size). A failure (an I/O error, a short read, a bad
  // checksum) drops the block and says why; `out` then holds nothing to use.
  virtual Status load(const TierBlockKey& key, std::span<std::byte> out) = 0;
  virtual void drop(const TierBlockKey& key) = 0;
  virtual TierStats stats() const = 0;
};

}  // namespace kvs
