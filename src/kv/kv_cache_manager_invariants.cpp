// KvCacheManager::check_invariants: what must hold between the pool, the tables, the index, the key tails and the
// pending copies after every operation (the tests call it after every step).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kv/kv_cache_manager.h"

namespace kvs {

Status KvCacheManager::check_invariants() const {
  KVS_RETURN_IF_ERROR(pool_.check_invariants());
  KVS_RETURN_IF_ERROR(index_.check_invariants());
  KVS_RETURN_IF_ERROR(tails_.check_invariants());
  const size_t bs = block_size();
  for (uint32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (tails_.tail_of(BlockId{b}) != kNoKeyTail && pool_.meta(BlockId{b}).ref_count == 0)
      return Status::corrupt(fmt::format("free block {} holds key tail {}", b, tails_.tail_of(BlockId{b})));
  }
  for (const auto& [id, t] : tables_) {
    const std::optional<size_t> filling = tail_block(t.num_slots());
    if (filling && t.blocks()[*filling] != kNullBlock && tails_.tail_of(t.blocks()[*filling]) == kNoKeyTail) {
      return Status::corrupt(
          fmt::format("sequence {} fills a key group in block {} without a key tail", id, t.blocks()[*filling].value));
    }
  }
  std::map<uint32_t, uint32_t> holders;  // block -> tables (and pending copies) holding it
  for (const auto& [id, t] : tables_) {
    const size_t before_window = std::min(blocks_skipped(t.num_tokens(), t.sequence_window()), t.blocks().size());
    for (size_t i = 0; i < t.blocks().size(); ++i) {
      if ((i < before_window) != (t.blocks()[i] == kNullBlock)) {
        return Status::corrupt(
            fmt::format("sequence {} of {} tokens (window {}) has block {} {} but {} blocks "
                        "lie before its window",
                        id, t.num_tokens(), config_.layer_window, i, t.blocks()[i] == kNullBlock ? "a hole" : "held",
                        before_window));
      }
    }
    if (t.blocks().size() < kv_blocks_for_tokens(t.num_slots(), bs)) {
      return Status::corrupt(
          fmt::format("sequence {} holds {} slots in only {} blocks", id, t.num_slots(), t.blocks().size()));
    }
    for (BlockId b : t.blocks()) {
      if (b == kNullBlock) continue;
      if (b.value >= pool_.num_blocks())
        return Status::corrupt(
            fmt::format("sequence {} holds block {} of a pool of {}", id, b.value, pool_.num_blocks()));
      ++holders[b.value];
    }
  }
  // A shared block is full in every holder, or a fork's partial last block with the same slots in each.
  std::map<uint32_t, size_t> shared_partial;  // block -> slots written
  for (const auto& [id, t] : tables_) {
    for (size_t i = 0; i < t.blocks().size(); ++i) {
      const BlockId b = t.blocks()[i];
      if (b == kNullBlock || holders[b.value] < 2 || (i + 1) * bs <= t.num_slots()) continue;
      if (t.evicts()) {
        return Status::corrupt(fmt::format("block {} of sequence {}, which evicts, is shared by {} tables", b.value, id,
                                           holders[b.value]));
      }
      const size_t written = t.num_slots() > i * bs ? t.num_slots() - i * bs : 0;
      const auto [seen, first] = shared_partial.try_emplace(b.value, written);
      if (i + 1 != t.blocks().size() || written == 0 || seen->second != written) {
        return Status::corrupt(fmt::format(
            "block {} is shared by {} tables but sequence {} has {} of its slots written and {} blocks after it",
            b.value, holders[b.value], id, written, t.blocks().size() - i - 1));
      }
    }
  }
  for (BlockId b : copy_sources_.blocks()) ++holders[b.value];  // pinned for a copy (pending, or dropped)
  for (const auto& [block, count] : holders) {
    const uint32_t refs = pool_.meta(BlockId{block}).ref_count;
    if (refs < count) {
      return Status::corrupt(fmt::format("block {} is in {} block tables but has ref count {}", block, count, refs));
    }
  }
  if (holders.size() != pool_.num_used_blocks()) {
    return Status::corrupt(
        fmt::format("{} blocks in use but {} held by tables", pool_.num_used_blocks(), holders.size()));
  }
  for (uint32_t b = 0; b < pool_.num_blocks(); ++b) {
    if ((pool_.meta(BlockId{b}).content_hash != 0) != index_.contains(BlockId{b})) {
      return Status::corrupt(fmt::format("block {}: the pool says {} cached content, the index {}", b,
                                         pool_.meta(BlockId{b}).content_hash != 0 ? "it holds" : "no",
                                         index_.contains(BlockId{b}) ? "has an entry" : "has none"));
    }
  }
  return Status::ok();
}

}  // namespace kvs
