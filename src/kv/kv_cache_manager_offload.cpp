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

KvCacheManager::PrefixLoad KvCacheManager::load_prefix(std::span<const TokenId> tokens, uint32_t ns) {
  PrefixLoad load;
  if (tiers_ == nullptr || tokens.size() < 2) return load;
  KVS_ASSERT(ns < roots_.size(), "unknown namespace {}", ns);
  const size_t bs = block_size(), limit = tokens.size() - 1;
  // The prefix's blocks in the pool, held while the walk allocates (which could otherwise take them), then the
  // blocks past them that the host tier holds or only the disk does, in order.
  PinnedBlocks chain;
  BlockHash parent_hash = roots_[ns];
  ContentRef parent = ContentRef::root(ns);
  struct Below {
    size_t first = 0;  // its first token
    BlockHash hash;
    bool in_host = false;
  };
  std::vector<Below> below;
  for (size_t first = 0; first + bs <= limit; first += bs) {
    const std::span<const TokenId> block_tokens = tokens.subspan(first, bs);
    const BlockHash hash = config_.hasher(parent_hash, block_tokens);
    parent_hash = hash;
    if (below.empty()) {
      if (const std::optional<BlockId> hit = index_.find_full(hash, parent, block_tokens)) {
        chain.append(PinnedBlocks::retain(pool_, std::span(&*hit, 1)));
        parent = content_of(*hit);
        continue;
      }
    }
    const bool in_host = tiers_->holds(hash, block_tokens);
    if (!in_host && !tiers_->on_disk(hash, block_tokens)) break;
    below.push_back({.first = first, .hash = hash, .in_host = in_host});
    load.on_disk += !in_host;
  }
  // All of it in the pool or the host tier: the sequence's begin() loads the host tier's blocks itself.
  if (load.on_disk == 0) return load;

  // Host tier blocks go into the pool while the whole prompt would still fit beside them, freeing the host tier for
  // the disk's next reads: into a free block each, as a cached block whose bytes the engine copies from the host tier
  // before the next pass.
  const auto whole_prompt_fits = [&] {
    return kv_blocks_for_tokens(tokens.size(), bs) - chain.size() <= pool_.num_free_blocks();
  };
  size_t next = 0;
  for (; next < below.size() && below[next].in_host && whole_prompt_fits(); ++next) {
    const Below& b = below[next];
    const std::span<const TokenId> block_tokens = tokens.subspan(b.first, bs);
    std::optional<PinnedBlocks> block = allocate(1);
    KVS_ASSERT(block.has_value(), "a free block could not be allocated");
    const BlockId id = block->blocks()[0];
    // The index may hold this hash already under another parent (an idle block whose parent was evicted and came
    // back) or for other tokens: then the pool cannot chain it (a lookup would stop there too), and the block goes
    // back unused; begin() loads the rest from the host tier as the disk's reads arrive.
    if (index_.add_full(id, b.hash, parent, block_tokens) != id) break;
    KVS_ASSERT(tiers_->pin(b.hash), "a block the host tier holds cannot be pinned");
    pending_transfers_.push_back({.kind = KvBlockTransfer::Kind::kLoad,
                                  .block = id,
                                  .hash = b.hash,
                                  .tokens = {block_tokens.begin(), block_tokens.end()},
                                  .ahead = true});
    pool_.set_content_hash(id, b.hash.low | 1);
    loaded_unread_.insert(id.value);
    chain.append(std::move(*block));
    parent = content_of(id);
    ++load.promoted;
  }
  // Disk reads staged in the host tier for this prefix at once: at most half of it, so that reads for one prompt
  // never push out its own blocks before they go into the pool.
  const size_t stage = tiers_->host().stats().capacity_bytes / tiers_->format().block_bytes / 2;
  size_t staged = 0;  // blocks past those in the pool held in the host tier or on their way into it
  for (; next < below.size() && staged < stage; ++next) {
    const Below& b = below[next];
    if (!b.in_host && !tiers_->prefetch(b.hash, tokens.subspan(b.first, bs))) break;
    ++staged;
    load.reading += !b.in_host;
  }
  return load;
}

}  // namespace kvs
