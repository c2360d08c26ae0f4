#include "kv/kv_cache_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "kv/kv_format.h"

namespace kvs {

Status KvCacheConfig::validate() const {
  KVS_RETURN_IF_ERROR(spec.validate());
  if (num_blocks == 0) return Status::out_of_memory("the KV pool has 0 blocks: the budget is below one block");
  if (kv_format(spec).has_key_tails() && num_key_tails == 0) {
    return Status::invalid_argument(
        "keys quantized per channel need key tails for their filling groups: num_key_tails is 0");
  }
  return Status::ok();
}

Expected<std::unique_ptr<KvCacheManager>> KvCacheManager::create(const KvCacheConfig& config) {
  KVS_RETURN_IF_ERROR(config.validate());
  return std::unique_ptr<KvCacheManager>(new KvCacheManager(config));
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config),
      attention_(make_kv_attention_type(config.layer_window)),
      key_format_(kv_format(config.spec).k),
      pool_(config.num_blocks),
      index_(config.num_blocks),
      tails_(key_format_.scale_axis == KvScaleAxis::kPerChannel ? config.num_key_tails : 0, config.num_blocks) {
  name_space("");  // namespace 0: no salt
}

const BlockTable& KvCacheManager::table(SeqId seq) const {
  auto it = tables_.find(seq.value);
  KVS_ASSERT(it != tables_.end(), "unknown sequence {}", seq.value);
  return it->second;
}

uint32_t KvCacheManager::name_space(std::string_view cache_salt) {
  const auto [it, added] = name_spaces_.try_emplace(std::string(cache_salt), static_cast<uint32_t>(roots_.size()));
  if (added) roots_.push_back(prefix_root_hash(config_.model_identity, cache_salt));
  return it->second;
}

std::optional<PinnedBlocks> KvCacheManager::allocate(size_t n) {
  auto blocks = pool_.allocate(n);
  if (!blocks) return std::nullopt;
  for (BlockId b : *blocks) {
    // Its cached content moves down a tier before anything writes the block (the engine does it first).
    if (tiers_ != nullptr) {
      if (const std::optional<BlockHash> hash = index_.full_hash(b)) {
        const std::span<const TokenId> tokens = index_.tokens(b);
        pending_transfers_.push_back({.kind = KvBlockTransfer::Kind::kDemote,
                                      .block = b,
                                      .hash = *hash,
                                      .tokens = {tokens.begin(), tokens.end()}});
        ++stats_.demoted_blocks;
      }
    }
    stats_.evictions += index_.erase(b);
    loaded_unread_.erase(b.value);
  }
  return PinnedBlocks(pool_, std::move(*blocks));
}

PrefixMatch KvCacheManager::match_prefix(std::span<const TokenId> tokens, uint32_t ns, size_t max_tokens) {
  if (!config_.prefix_caching || tokens.size() < 2) return {};
  KVS_ASSERT(ns < roots_.size(), "unknown namespace {}", ns);
  return attention_->longest_cached_prefix({.tokens = tokens,
                                            .name_space = ns,
                                            .root = roots_[ns],
                                            .limit = std::min(tokens.size() - 1, max_tokens),  // the last is computed
                                            .block_size = block_size(),
                                            .copy_unit = partial_copy_unit(),
                                            .hasher = config_.hasher,
                                            .index = &index_,
                                            .pool = &pool_,
                                            .tiers = tiers_});
}

std::vector<BlockId> KvCacheManager::blocks_taken(const PrefixMatch& match, size_t sequence_window) const {
  // A window takes only the matched blocks its first computed token reads: the others are holes.
  const size_t skipped = std::min(blocks_skipped(match.num_tokens(block_size()), sequence_window), match.blocks.size());
  std::vector<BlockId> taken(match.blocks.begin(), match.blocks.end());
  std::fill_n(taken.begin(), skipped, kNullBlock);
  return taken;
}

bool KvCacheManager::can_begin(const PrefixMatch& match, size_t n, size_t sequence_window) const {
  const size_t bs = block_size(), cached = match.num_tokens(bs);
  // Blocks the match takes off the free list are not free for the new ones.
  size_t taken_idle = 0;
  for (BlockId b : blocks_taken(match, sequence_window)) taken_idle += b != kNullBlock && pool_.meta(b).ref_count == 0;
  if (match.partial_tokens > 0 && !match.partial_in_tier())
    taken_idle += pool_.meta(match.partial_source).ref_count == 0;
  const size_t fresh_blocks = kv_blocks_for_tokens(cached + n, bs) - match.blocks.size();
  if (fresh_blocks + taken_idle > pool_.num_free_blocks()) return false;
  return !tail_block(cached + n) || tails_.num_free() > 0;
}

bool KvCacheManager::begin(SeqId seq, std::span<const TokenId> tokens, uint32_t ns, const PrefixMatch& match, size_t n,
                           size_t sequence_window, bool evicts) {
  KVS_ASSERT(!contains(seq), "sequence {} begins twice", seq.value);
  KVS_ASSERT(ns < roots_.size(), "unknown namespace {}", ns);
  const size_t bs = block_size(), cached = match.num_tokens(bs);
  KVS_ASSERT(cached + n <= tokens.size() && match.partial_tokens < bs, "a match of {} + {} tokens for a sequence of {}",
             cached, n, tokens.size());
  KVS_ASSERT(!evicts || (cached == 0 && sequence_window == 0),
             "a sequence under an eviction policy begins from a prefix match of {} tokens or with a window of {}",
             cached, sequence_window);
  if (!can_begin(match, n, sequence_window)) return false;
  const std::vector<BlockId> taken = blocks_taken(match, sequence_window);
  const size_t fresh_blocks = kv_blocks_for_tokens(cached + n, bs) - match.blocks.size();
  KVS_ASSERT(fresh_blocks > 0 || match.partial_tokens == 0, "a partial match of {} slots with no block to copy into",
             match.partial_tokens);
  const bool from_tier = !match.tier_hashes.empty() || match.partial_in_tier();
  KVS_ASSERT(!from_tier || (tiers_ != nullptr && sequence_window == 0 && !evicts &&
                            (match.tier_hashes.empty() || match.partial_source == kNullBlock)),
             "a match of {} tier blocks with a partial block in the pool, a window or no tiers",
             match.tier_hashes.size());
  const std::optional<size_t> tail = tail_block(cached + n);  // a fresh block: the match's are whole groups

  PinnedBlocks shared = PinnedBlocks::retain(pool_, taken);
  // The copy's source is pinned before the allocation, which could otherwise evict it.
  const bool pool_partial = match.partial_tokens > 0 && !match.partial_in_tier();
  if (pool_partial) copy_sources_.append(PinnedBlocks::retain(pool_, std::span(&match.partial_source, 1)));
  std::optional<PinnedBlocks> fresh = allocate(fresh_blocks);
  KVS_ASSERT(fresh.has_value(), "{} blocks were free but allocation failed", fresh_blocks);
  if (pool_partial) {
    pending_copies_.push_back(
        {.source = match.partial_source, .destination = fresh->blocks()[0], .num_slots = match.partial_tokens});
  }
  // The first fresh blocks take the tier's bytes: its full blocks, then a kept partial block.
  const auto load = [&](size_t i, const BlockHash& hash, size_t num_tokens) {
    KVS_ASSERT(tiers_->pin(hash), "a block the host tier held at the lookup is gone");
    const std::span<const TokenId> block_tokens = tokens.subspan((match.blocks.size() + i) * bs, num_tokens);
    pending_transfers_.push_back({.kind = KvBlockTransfer::Kind::kLoad,
                                  .block = fresh->blocks()[i],
                                  .hash = hash,
                                  .tokens = {block_tokens.begin(), block_tokens.end()}});
  };
  for (size_t i = 0; i < match.tier_hashes.size(); ++i) load(i, match.tier_hashes[i], bs);
  if (match.partial_in_tier()) load(match.tier_hashes.size(), match.partial_hash, match.partial_tokens);
  BlockTable& t = tables_.emplace(seq.value, BlockTable(bs, ns, sequence_window, evicts)).first->second;
  t.add_blocks(std::move(shared));
  t.add_blocks(std::move(*fresh));
  t.advance(tokens.first(cached));
  for (size_t i = 0; i < match.blocks.size(); ++i) {
    const BlockId b = match.blocks[i];
    t.push_hash(match.hashes[i], b == kNullBlock ? ContentRef::unknown() : content_of(b));
  }
  if (tail) KVS_ASSERT(tails_.assign(t.blocks()[*tail]), "a key tail was free but assignment failed");
  if (!match.tier_hashes.empty()) index_full_blocks(t);  // loaded blocks are found like computed ones
  if (config_.prefix_caching) {
    stats_.queried_tokens += tokens.size();
    stats_.hit_tokens += cached;
    stats_.copied_tokens += pool_partial ? match.partial_tokens : 0;
    size_t loaded = 0;  // blocks load_prefix() put into the pool for it (or for another prompt of the same prefix)
    for (BlockId b : taken) loaded += b != kNullBlock && loaded_unread_.erase(b.value) > 0;
    stats_.tier_hit_tokens +=
        (match.tier_hashes.size() + loaded) * bs + (match.partial_in_tier() ? match.partial_tokens : 0);
  }
  release_kept(seq);  // what a swap kept of it was just found (or, where the host tier dropped it, is recomputed)
  return true;
}

void KvCacheManager::fork(SeqId parent, SeqId child) {
  KVS_ASSERT(!contains(child), "sequence {} is forked into twice", child.value);
  const BlockTable& p = table(parent);
  KVS_ASSERT(!p.evicts(), "sequence {}, under an eviction policy, is forked", parent.value);
  KVS_ASSERT(p.blocks().size() == kv_blocks_for_tokens(p.num_slots(), block_size()),
             "sequence {} is forked with room reserved past its {} tokens", parent.value, p.num_tokens());
  BlockTable forked = p.fork(pool_);
  tables_.emplace(child.value, std::move(forked));
}

bool KvCacheManager::shares_partial_block(const BlockTable& t) const {
  if (t.num_slots() % block_size() == 0) return false;
  const BlockId last = t.blocks()[t.num_slots() / block_size()];
  if (last == kNullBlock) return false;
  // References beyond this table's: other tables, or the pin of a pending copy that reads it.
  const auto pins = std::ranges::count(copy_sources_.blocks(), last);
  return pool_.meta(last).ref_count - static_cast<uint32_t>(pins) > 1;
}

void KvCacheManager::copy_on_write(BlockTable& t, PinnedBlocks private_block) {
  const size_t index = t.num_tokens() / block_size();
  const BlockId shared = t.blocks()[index];
  copy_sources_.append(PinnedBlocks::retain(pool_, std::span(&shared, 1)));
  const BlockId destination = private_block.blocks()[0];
  const uint32_t source_tail = tails_.tail_of(shared);
  if (source_tail != kNoKeyTail) KVS_ASSERT(tails_.assign(destination), "no key tail for a copy on write");
  pending_copies_.push_back({.source = shared,
                             .destination = destination,
                             .num_slots = t.num_tokens() % block_size(),
                             .source_tail = source_tail,
                             .destination_tail = tails_.tail_of(destination)});
  t.replace_block(index, std::move(private_block));
  ++num_copy_on_write_;
}

std::optional<size_t> KvCacheManager::tail_block(size_t end) const {
  if (key_format_.tail_rows(end) == 0) return std::nullopt;
  return end / block_size();
}

size_t KvCacheManager::tails_needed(const BlockTable* t, size_t n) const {
  const std::optional<size_t> at = tail_block((t ? t->num_slots() : 0) + n);
  const bool copy = t && n > 0 && shares_partial_block(*t);
  const size_t copied = t ? t->num_tokens() / block_size() : 0;  // the block a copy on write replaces
  const bool copy_tail = copy && tails_.tail_of(t->blocks()[copied]) != kNoKeyTail;
  if (!at) return copy_tail;
  // The block where the group fills: new, the private copy (a tail iff the copy's source has one), or held.
  bool has_tail = false;
  if (t && *at < t->blocks().size() && t->blocks()[*at] != kNullBlock)
    has_tail = copy && *at == copied ? copy_tail : tails_.tail_of(t->blocks()[*at]) != kNoKeyTail;
  return copy_tail + !has_tail;
}

void KvCacheManager::release_tails_of_unheld(std::span<const BlockId> blocks) {
  for (BlockId b : blocks)
    if (b != kNullBlock && pool_.meta(b).ref_count == 0) tails_.release(b);
}

bool KvCacheManager::can_reserve(SeqId seq, size_t n) const {
  auto it = tables_.find(seq.value);
  const BlockTable* t = it == tables_.end() ? nullptr : &it->second;
  if (tails_needed(t, n) > tails_.num_free()) return false;
  if (!t) return kv_blocks_for_tokens(n, block_size()) <= pool_.num_free_blocks();
  const bool copy = n > 0 && shares_partial_block(*t);
  return t->blocks_needed(n) + copy <= pool_.num_free_blocks();
}

bool KvCacheManager::reserve(SeqId seq, size_t n) {
  if (!can_reserve(seq, n)) return false;
  auto it = tables_.find(seq.value);
  const bool is_new = it == tables_.end();
  const bool copy = n > 0 && !is_new && shares_partial_block(it->second);
  const size_t needed = is_new ? kv_blocks_for_tokens(n, block_size()) : it->second.blocks_needed(n);
  std::optional<PinnedBlocks> private_block = copy ? allocate(1) : std::nullopt;
  std::optional<PinnedBlocks> blocks = allocate(needed);
  KVS_ASSERT(blocks && (!copy || private_block), "{} blocks were free but allocation failed", needed + copy);
  if (is_new) it = tables_.emplace(seq.value, BlockTable(block_size(), 0)).first;
  if (copy) copy_on_write(it->second, std::move(*private_block));
  it->second.add_blocks(std::move(*blocks));
  if (const std::optional<size_t> at = tail_block(it->second.num_slots() + n))
    KVS_ASSERT(tails_.assign(it->second.blocks()[*at]), "a key tail was free but assignment failed");
  return true;
}

KvSlot KvCacheManager::slot_of(SeqId seq, size_t position) const { return table(seq).slot_of(position); }

void KvCacheManager::index_full_blocks(BlockTable& t) {
  const size_t bs = block_size();
  for (size_t i = t.num_hashed(); (i + 1) * bs <= t.num_tokens(); ++i) {
    const BlockId block = t.blocks()[i];
    const std::span<const TokenId> block_tokens = t.tokens().subspan(i * bs, bs);
    const BlockHash hash = config_.hasher(parent_hash(t, i), block_tokens);
    const std::optional<BlockId> stands_for = index_.add_full(block, hash, t.parent_of(i), block_tokens);
    if (stands_for == block) pool_.set_content_hash(block, hash.low | 1);  // never 0: "no content"
    // A twin stands for this content in the index; after a collision the block stands for itself, unindexed.
    t.push_hash(hash, content_of(stands_for.value_or(block)));
  }
}

void KvCacheManager::commit(SeqId seq, std::span<const TokenId> tokens) {
  auto it = tables_.find(seq.value);
  KVS_ASSERT(it != tables_.end(), "commit to unknown sequence {}", seq.value);
  BlockTable& t = it->second;
  const size_t before = t.num_slots() / block_size();
  t.advance(tokens);
  // Groups completed by these tokens are quantized: their blocks' tails go back (the blocks were
  // written, so they are this table's alone), all but the one where a group still fills.
  const std::optional<size_t> filling = tail_block(t.num_slots());
  for (size_t i = before; i < t.blocks().size(); ++i)
    if (i != filling && t.blocks()[i] != kNullBlock) tails_.release(t.blocks()[i]);
  if (config_.prefix_caching && !t.evicts()) index_full_blocks(t);
  drop_skipped_blocks(t);
}

void KvCacheManager::drop_skipped_blocks(BlockTable& t) {
  // The blocks before the window are holes up to where the last drop stopped: walk back from the new end.
  for (size_t i = std::min(blocks_skipped(t.num_tokens(), t.sequence_window()), t.blocks().size()); i-- > 0;) {
    const BlockId block = t.blocks()[i];
    if (block == kNullBlock) break;
    t.drop_block(i);
    release_tails_of_unheld(std::span(&block, 1));
  }
}

void KvCacheManager::free(SeqId seq) {
  release_kept(seq);
  release_table(seq);
}

void KvCacheManager::release_table(SeqId seq) {
  auto it = tables_.find(seq.value);
  if (it == tables_.end()) return;
  const BlockTable& t = it->second;
  const size_t bs = block_size(), filled = t.num_tokens() % bs, last = t.num_tokens() / bs;
  // A partial last block of its own stays findable: a prompt that shares part of it copies those slots.
  if (config_.prefix_caching && filled > 0 && !t.evicts()) {
    const BlockId block = t.blocks()[last];
    if (block != kNullBlock && pool_.meta(block).ref_count == 1 && !index_.contains(block)) {
      const std::span<const TokenId> partial = t.tokens().subspan(last * bs, filled);
      index_.add_partial(block, t.parent_of(last), partial);
      pool_.set_content_hash(block, config_.hasher(parent_hash(t, last), partial).low | 1);
    }
  }
  // Copies into its blocks that have not run yet are moot now.
  std::erase_if(pending_copies_,
                [&](const KvBlockCopy& c) { return std::ranges::find(t.blocks(), c.destination) != t.blocks().end(); });
  const std::vector<BlockId> blocks(t.blocks().begin(), t.blocks().end());
  tables_.erase(it);  // the table's PinnedBlocks release tail first
  release_tails_of_unheld(blocks);
}

void KvCacheManager::copies_done() {
  pending_copies_.clear();
  const std::vector<BlockId> sources(copy_sources_.blocks().begin(), copy_sources_.blocks().end());
  copy_sources_.release();
  release_tails_of_unheld(sources);
}

void KvCacheManager::forget_cached() {
  KVS_ASSERT(tables_.empty() && pending_transfers_.empty() && pending_copies_.empty(),
             "forget_cached() with {} sequences, {} transfers and {} copies pending", tables_.size(),
             pending_transfers_.size(), pending_copies_.size());
  for (BlockId b : pool_.forget_cached_content()) index_.erase(b);  // every block is free
  loaded_unread_.clear();
}

size_t KvCacheManager::num_tokens(SeqId seq) const {
  auto it = tables_.find(seq.value);
  return it == tables_.end() ? 0 : it->second.num_tokens();
}
size_t KvCacheManager::num_slots(SeqId seq) const {
  auto it = tables_.find(seq.value);
  return it == tables_.end() ? 0 : it->second.num_slots();
}
size_t KvCacheManager::num_evicted(SeqId seq) const {
  auto it = tables_.find(seq.value);
  return it == tables_.end() ? 0 : it->second.num_evicted();
}

void KvCacheManager::evict(SeqId seq, size_t count) {
  auto it = tables_.find(seq.value);
  KVS_ASSERT(it != tables_.end(), "evict from unknown sequence {}", seq.value);
  const std::vector<BlockId> blocks(it->second.blocks().begin(), it->second.blocks().end());
  it->second.evict(count);
  release_tails_of_unheld(blocks);
  stats_evicted_tokens_ += count;
}
std::span<const TokenId> KvCacheManager::tokens(SeqId seq) const { return table(seq).tokens(); }
std::span<const BlockId> KvCacheManager::block_table(SeqId seq) const { return table(seq).blocks(); }

KvUsage KvCacheManager::usage() const {
  const size_t per_block = kv_bytes_per_block(config_.spec).total(), per_tail = kv_key_tail_bytes(config_.spec);
  return KvUsage{.blocks_total = pool_.num_blocks(),
                 .blocks_used = pool_.num_used_blocks(),
                 .blocks_used_peak = pool_.peak_used_blocks(),
                 .blocks_cached_idle = pool_.num_cached_free_blocks(),
                 .key_tails_total = tails_.num_tails(),
                 .key_tails_used = tails_.num_used(),
                 .bytes_total = pool_.num_blocks() * per_block + tails_.num_tails() * per_tail,
                 .bytes_used = pool_.num_used_blocks() * per_block + tails_.num_used() * per_tail};
}

PrefixCacheStats KvCacheManager::prefix_stats() const {
  PrefixCacheStats s = stats_;
  s.collisions = index_.num_collisions();
  return s;
}

}  // namespace kvs
