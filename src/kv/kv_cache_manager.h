// The facade the engine uses: a block pool and one block table per sequence: accounting only. The
// K/V bytes (a KvStorage of config().spec and num_blocks) belong to whoever computes, so the scheduler and the
// paging simulation run without them. Blocks are allocated on demand as a sequence grows and all
// released the moment it is freed, tail first. Running out of blocks is an expected outcome the
// caller acts on (queue, preempt), never a crash.
#pragma once

#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/kv_sizing.h"

namespace kvs {

struct KvCacheConfig {
  KvCacheSpec spec;       // model shape, element type, block size
  size_t num_blocks = 0;  // pool size (from --kv-blocks, or a byte budget via kv_blocks_in_budget)

  Status validate() const;
};

struct KvUsage {
  size_t blocks_total = 0;
  size_t blocks_used = 0;
  size_t bytes_total = 0;  // what the pool allocated
  size_t bytes_used = 0;   // blocks_used x bytes per block
};

class KvCacheManager {
 public:
  static Expected<std::unique_ptr<KvCacheManager>> create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  size_t block_size() const { return config_.spec.block_size; }

  // Makes room for `n` more tokens of `seq` (created on first use), allocating blocks as needed.
  // Returns false, with nothing changed, when the pool cannot supply them.
  [[nodiscard]] bool reserve(SeqId seq, size_t n);
  // Would reserve(seq, n) succeed right now?
  bool can_reserve(SeqId seq, size_t n) const;
  // Slot for the token at `position` of `seq`; its block must be reserved.
  KvSlot slot_of(SeqId seq, size_t position) const;
  // Records that `tokens` were written as the next positions of `seq` (their ids: what prefix
  // hashing reads).
  void commit(SeqId seq, std::span<const TokenId> tokens);
  // Releases every block of `seq` at once, the last block first, and forgets it. Unknown ids are ignored.
  void free(SeqId seq);

  bool contains(SeqId seq) const { return tables_.count(seq.value) != 0; }
  // Tokens of `seq` whose K/V are written (0 for a sequence without blocks): its one computed count.
  size_t num_tokens(SeqId seq) const;
  std::span<const TokenId> tokens(SeqId seq) const;
  std::span<const BlockId> block_table(SeqId seq) const;
  size_t num_sequences() const { return tables_.size(); }

  const BlockPool& pool() const { return pool_; }
  KvUsage usage() const;
  // Pool invariants plus: each block in tables has a ref count of at least the tables holding it
  // (a shared block is in several), every block in use is in a table, each table has at least the
  // blocks its committed tokens need (reserved ones may be ahead).
  Status check_invariants() const;

 private:
  explicit KvCacheManager(const KvCacheConfig& config);
  const BlockTable& table(SeqId seq) const;

  KvCacheConfig config_;
  BlockPool pool_;  // declared before the tables, whose references it must outlive
  std::unordered_map<uint64_t, BlockTable> tables_;
};

}  // namespace kvs
