#include "kv/kv_cache_manager.h"

#include <fmt/format.h>

#include <map>
#include <memory>

namespace kvs {

Status KvCacheConfig::validate() const {
  KVS_RETURN_IF_ERROR(spec.validate());
  if (spec.mla)
    return Status::unimplemented("the engine's KV storage holds K and V; an MLA latent is sized by calc only");
  if (kv_dtype_quantized(spec.dtype.k) || kv_dtype_quantized(spec.dtype.v)) {
    return Status::unimplemented(
        fmt::format("the engine's attention reads f32, f16 or bf16 K/V elements; KV dtype {} is sized by calc only",
                    kv_dtypes_name(spec.dtype)));
  }
  if (num_blocks == 0) return Status::out_of_memory("the KV pool has 0 blocks: the budget is below one block");
  return Status::ok();
}

Expected<std::unique_ptr<KvCacheManager>> KvCacheManager::create(const KvCacheConfig& config) {
  KVS_RETURN_IF_ERROR(config.validate());
  return std::unique_ptr<KvCacheManager>(new KvCacheManager(config));
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config) : config_(config), pool_(config.num_blocks) {}

const BlockTable& KvCacheManager::table(SeqId seq) const {
  auto it = tables_.find(seq.value);
  KVS_ASSERT(it != tables_.end(), "unknown sequence {}", seq.value);
  return it->second;
}

bool KvCacheManager::can_reserve(SeqId seq, size_t n) const {
  auto it = tables_.find(seq.value);
  const size_t needed = it == tables_.end() ? kv_blocks_for_tokens(n, block_size()) : it->second.blocks_needed(n);
  return needed <= pool_.num_free_blocks();
}

bool KvCacheManager::reserve(SeqId seq, size_t n) {
  auto it = tables_.find(seq.value);
  const bool is_new = it == tables_.end();
  const size_t needed = is_new ? kv_blocks_for_tokens(n, block_size()) : it->second.blocks_needed(n);
  auto blocks = pool_.allocate(needed);
  if (!blocks) return false;
  if (is_new) it = tables_.emplace(seq.value, BlockTable(block_size())).first;
  it->second.add_blocks(PinnedBlocks(pool_, std::move(*blocks)));
  return true;
}

KvSlot KvCacheManager::slot_of(SeqId seq, size_t position) const { return table(seq).slot_of(position); }

void KvCacheManager::commit(SeqId seq, std::span<const TokenId> tokens) {
  auto it = tables_.find(seq.value);
  KVS_ASSERT(it != tables_.end(), "commit to unknown sequence {}", seq.value);
  it->second.advance(tokens);
}

void KvCacheManager::free(SeqId seq) { tables_.erase(seq.value); }  // the table's PinnedBlocks release tail first

size_t KvCacheManager::num_tokens(SeqId seq) const {
  auto it = tables_.find(seq.value);
  return it == tables_.end() ? 0 : it->second.num_tokens();
}
std::span<const TokenId> KvCacheManager::tokens(SeqId seq) const { return table(seq).tokens(); }
std::span<const BlockId> KvCacheManager::block_table(SeqId seq) const { return table(seq).blocks(); }

KvUsage KvCacheManager::usage() const {
  const size_t per_block = kv_bytes_per_block(config_.spec).total();
  return KvUsage{.blocks_total = pool_.num_blocks(),
                 .blocks_used = pool_.num_used_blocks(),
                 .bytes_total = pool_.num_blocks() * per_block,
                 .bytes_used = pool_.num_used_blocks() * per_block};
}

Status KvCacheManager::check_invariants() const {
  KVS_RETURN_IF_ERROR(pool_.check_invariants());
  std::map<uint32_t, uint32_t> holders;  // block -> tables holding it
  for (const auto& [id, t] : tables_) {
    if (t.blocks().size() < kv_blocks_for_tokens(t.num_tokens(), block_size())) {
      return Status::corrupt(
          fmt::format("sequence {} holds {} tokens in only {} blocks", id, t.num_tokens(), t.blocks().size()));
    }
    for (BlockId b : t.blocks()) {
      if (b == kNullBlock) continue;
      if (b.value >= pool_.num_blocks())
        return Status::corrupt(
            fmt::format("sequence {} holds block {} of a pool of {}", id, b.value, pool_.num_blocks()));
      ++holders[b.value];
    }
  }
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
  return Status::ok();
}

}  // namespace kvs
