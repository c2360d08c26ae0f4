// The offload planner: turns a KV manager's tier transfers (kv_cache_manager.h's KvBlockTransfer: demote, keep,
// load), in order, into byte moves for the step's KV op log (kv/kv_ops.h). It decides against the tier stack's
// directory and does no I/O: whether a demoted block is new to the host tier (and which slot it takes, dropping the
// least recently used), whether it is written through to the disk tier, which slot a swapped-out block is kept in
// (pinned), and which slot a load reads. The executor moves the bytes after, in the same order, so a slot taken
// twice in one step ends with the later block, as the directory says.
#pragma once

#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_ops.h"
#include "kv/tiers/kv_tier_stack.h"

namespace kvs {

// Appends the byte moves of `transfers` (layer group 0) to `ops`. A block kept pinned or loaded is always placed (the
// manager asked only for what the tier can pin and pinned what it loads); a demotion the tier refuses moves nothing.
void plan_tier_transfers(std::span<const KvBlockTransfer> transfers, KvTierStack& tiers, std::vector<KvOp>& ops);
// At the end of a pool with a disk tier: appends a write of each full block the prefix index holds that the disk tier
// does not hold yet, so that a restart finds it.
void plan_persist(const KvCacheManager& kv, const KvTierStack& tiers, std::vector<KvOp>& ops);

}  // namespace kvs
