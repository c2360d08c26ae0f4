// KvCacheManager and the offload tiers below its pool: matches that go on into the host tier, swap-outs kept there,
// prefetches from disk, and the transfers the engine moves the bytes of.
#include <fmt/format.h>

#include <algorithm>

#include "kv/kv_cache_manager.h"

namespace kvs {

void KvCacheManager::release_kept(SeqId seq) {
  auto it = kept_.find(seq.value);
  if (it == kept_.end()) return;
  for (const BlockHash& hash : it->second) tiers_->release_kept(hash);
  kept_.erase(it);
}

size_t KvCacheManager::blocks_to_keep(SeqId seq) const {
  auto it = tables_.find(seq.value);
  if (tiers_ == nullptr || it == tables_.end() || it->second.evicts()) return 0;
  const size_t n = it->second.num_tokens();
  return n / block_size() + (n % block_size() >= partial_copy_unit());
}

bool KvCacheManager::swap_out(SeqId seq) {
  const size_t keep = blocks_to_keep(seq);
  if (keep == 0) return false;
  // Blocks pinned now, and those other swaps of this step will pin when their transfers run.
  const size_t pending = static_cast<size_t>(std::ranges::count_if(
      pending_transfers_, [](const KvBlockTransfer& t) { return t.kind == KvBlockTransfer::Kind::kKeep; }));
  if (keep + pending > tiers_->room_to_keep()) return false;
  release_kept(seq);
  const BlockTable& t = table(seq);
  const size_t bs = block_size(), full = t.num_tokens() / bs;
  KVS_ASSERT(t.num_hashed() >= full, "sequence {} has {} full blocks but {} hashes", seq.value, full, t.num_hashed());
  std::vector<BlockHash>& kept = kept_[seq.value];
  const auto keep_block = [&](size_t i, size_t num_tokens, const BlockHash& hash) {
    const std::span<const TokenId> block_tokens = t.tokens().subspan(i * bs, num_tokens);
    pending_transfers_.push_back({.kind = KvBlockTransfer::Kind::kKeep,
                                  .block = t.blocks()[i],
                                  .hash = hash,
                                  .tokens = {block_tokens.begin(), block_tokens.end()}});
    kept.push_back(hash);
  };
  for (size_t i = 0; i < full; ++i) keep_block(i, bs, t.hash(i));
  if (keep > full) {  // the partial last block, in whole copy units (a filling key group is recomputed)
    const size_t n = t.num_tokens() % bs / partial_copy_unit() * partial_copy_unit();
    keep_block(full, n, config_.hasher(parent_hash(t, full), t.tokens().subspan(full * bs, n)));
  }
  release_table(seq);
  return true;
}

void KvCacheManager::attach_tiers(KvTierStack* tiers) {
  KVS_ASSERT(tiers_ == nullptr && tables_.empty() &&
                 (tiers == nullptr || (config_.prefix_caching && config_.layer_window == 0)),
             "offload tiers attached twice, to a manager in use, or without a prefix cache or with a window");
  tiers_ = tiers;
}

void KvCacheManager::transfers_done() {
  for (const KvBlockTransfer& t : pending_transfers_)
    if (t.kind == KvBlockTransfer::Kind::kLoad) tiers_->unpin(t.hash);
  pending_transfers_.clear();
}

size_t KvCacheManager::prefetch_prefix(std::span<const TokenId> tokens, uint32_t ns) {
  if (tiers_ == nullptr || tokens.size() < 2) return 0;
  KVS_ASSERT(ns < roots_.size(), "unknown namespace {}", ns);
  const size_t bs = block_size(), limit = tokens.size() - 1;
  // Blocks held in the host tier or coming into it for this prefix: at most half of it, so that reads for one
  // prompt never push out its own blocks.
  const size_t host_blocks = tiers_->host().stats().capacity_bytes / tiers_->format().block_bytes / 2;
  BlockHash parent_hash = roots_[ns];
  ContentRef parent = ContentRef::root(ns);
  bool in_pool = true;
  size_t staged = 0, on_the_way = 0;
  for (size_t first = 0; first + bs <= limit && staged < host_blocks; first += bs) {
    const std::span<const TokenId> block_tokens = tokens.subspan(first, bs);
    const BlockHash hash = config_.hasher(parent_hash, block_tokens);
    parent_hash = hash;
    if (in_pool) {
      if (const std::optional<BlockId> hit = index_.find_full(hash, parent, block_tokens)) {
        parent = content_of(*hit);
        continue;
      }
      in_pool = false;
    }
    ++staged;
    if (tiers_->holds(hash, block_tokens)) continue;
    if (!tiers_->prefetch(hash, block_tokens)) break;
    ++on_the_way;
  }
  return on_the_way;
}

}  // namespace kvs
