// Decide here, move bytes in one place. The KV manager, the offload planner (kv/tiers/offload_planner.h) and the
// eviction policies decide; every move of K/V bytes they ask for is a plain-data operation appended to one per-step
// log, in the order asked, and one KvExecutor applies the log before the step's forward pass reads the cache. The
// host executor (attention/host_kv_executor.h) moves host memory; tensor parallelism sends the same log to every rank,
// whose executor applies it to the KV heads that rank holds (parallel/kv_op_wire.h); a device backend is another
// executor. Operations name blocks of a layer group's pool and slots of the host tier (kv/tiers/host_slabs.h), never
// hashes or sequences: whatever an executor holds, the same log moves the same bytes.
#pragma once

#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "kv/prefix_hash.h"

namespace kvs {

// Slots [0, num_slots) of every layer's K/V of `from` into `to`, same group (a partial prefix hit, a copy on write),
// and the key tail with them when the block has one (keys quantized per channel).
struct KvCopySlots {
  uint32_t group = 0;
  BlockId from = kNullBlock, to = kNullBlock;
  uint32_t num_slots = 0;
  uint32_t from_tail = kNoKeyTail, to_tail = kNoKeyTail;
};

// An eviction policy's compaction of one sequence (attention/compact_kv.h): `blocks` its block table in `group`,
// `kept` the old slots each row keeps, in order: one row for every layer and head, or a row per layer x the model's
// KV heads (per-head policies; each tensor-parallel rank applies the rows of its own heads).
struct KvCompact {
  uint32_t group = 0;
  std::vector<BlockId> blocks = {};
  std::vector<std::vector<uint32_t>> kept = {};
};

// A whole block of layer group 0 (kv_storage.h's block buffer) into slot `host_slot` of the host tier.
struct KvBlockToHost {
  BlockId block = kNullBlock;
  uint64_t host_slot = 0;
};

// Host tier slot `host_slot` into a block of layer group 0. `ahead`: a load for a sequence that has not begun (a
// prefix brought up while its request waits): no pass of this step reads the block, so a device may move it beside
// the step's compute, as long as it is there before the next step's.
struct KvHostToBlock {
  uint64_t host_slot = 0;
  BlockId block = kNullBlock;
  bool ahead = false;
};

// A whole block of layer group 0 written through to the disk tier under its hash and tokens (rank 0's executor: the
// disk holds one rank's bytes, so tiers with a disk are not split over ranks).
struct KvBlockToDisk {
  BlockId block = kNullBlock;
  BlockHash hash = {};
  std::vector<TokenId> tokens = {};
};

using KvOp = std::variant<KvCopySlots, KvCompact, KvBlockToHost, KvHostToBlock, KvBlockToDisk>;

// What applying a log moved between the pool and the tiers (the preemption cost model's copy bandwidth).
struct KvApplyStats {
  size_t tier_bytes = 0;
  double tier_seconds = 0;
  size_t retried = 0;  // operations a device could not move (a lost submission) that the host moved instead
};

class HostSlabs;
class KvTierStack;

class KvExecutor {
 public:
  virtual ~KvExecutor() = default;
  // The host tier's slots (KvBlockToHost, KvHostToBlock) and the disk tier's writer (KvBlockToDisk): the rank that
  // decides gives its tier stack's for both, another tensor-parallel rank slabs of its own and no disk. Not owned.
  virtual void attach_tiers(HostSlabs* slabs, KvTierStack* disk) = 0;
  // Applies `ops` in order; nothing may read or write the cache meanwhile. An error names the operation that failed
  // (the ones before it were applied). Once a step, before its forward pass (with an empty log too: what a device
  // moved ahead the step before is awaited from here on).
  virtual Expected<KvApplyStats> apply(std::span<const KvOp> ops) = 0;
  // Waits until every move applied so far is done, before the host reads or writes the host tier's slots (a device
  // may still be moving them after apply() returned).
  virtual Status wait_for_transfers() { return Status::ok(); }
};

}  // namespace kvs
