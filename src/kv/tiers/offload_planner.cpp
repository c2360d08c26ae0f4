#include "kv/tiers/offload_planner.h"

namespace kvs {

void plan_tier_transfers(std::span<const KvBlockTransfer> transfers, KvTierStack& tiers, std::vector<KvOp>& ops) {
  for (const KvBlockTransfer& t : transfers) {
    switch (t.kind) {
      case KvBlockTransfer::Kind::kDemote: {
        const bool to_disk = tiers.disk() != nullptr && !tiers.on_disk(t.hash, t.tokens);
        if (tiers.holds(t.hash, t.tokens) && !to_disk) break;  // nothing to move (and no recency to refresh)
        const auto placed = tiers.place_demoted(t.hash, t.tokens);
        if (placed && placed->write) ops.push_back(KvBlockToHost{.block = t.block, .host_slot = placed->slot});
        if (to_disk) ops.push_back(KvBlockToDisk{.block = t.block, .hash = t.hash, .tokens = t.tokens});
        break;
      }
      case KvBlockTransfer::Kind::kKeep: {  // a block of a swapped-out sequence: no copy when the tier holds it
        const auto placed = tiers.place_kept(t.hash, t.tokens);  // nothing: it will be recomputed
        if (placed && placed->write) ops.push_back(KvBlockToHost{.block = t.block, .host_slot = placed->slot});
        break;
      }
      case KvBlockTransfer::Kind::kLoad: {
        const auto slot = tiers.slot_to_load(t.hash);  // pinned since the lookup: held
        KVS_ASSERT(slot.has_value(), "a pinned host tier block cannot be loaded: {}", slot.status().message());
        ops.push_back(KvHostToBlock{.host_slot = *slot, .block = t.block, .ahead = t.ahead});
        break;
      }
    }
  }
}

void plan_persist(const KvCacheManager& kv, const KvTierStack& tiers, std::vector<KvOp>& ops) {
  if (tiers.disk() == nullptr) return;
  kv.for_each_cached_full_block([&](BlockId block, const BlockHash& hash, std::span<const TokenId> tokens) {
    if (!tiers.on_disk(hash, tokens))
      ops.push_back(KvBlockToDisk{.block = block, .hash = hash, .tokens = {tokens.begin(), tokens.end()}});
  });
}

}  // namespace kvs
