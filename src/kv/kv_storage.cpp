#include "kv/kv_storage.h"

#include <cstring>

#include "core/status.h"
#include "kv/kv_sizing.h"

namespace kvs {

KvStorage::KvStorage(const KvCacheSpec& spec, size_t num_blocks, size_t num_key_tails)
    : spec_(spec),
      format_(kv_format(spec)),
      num_blocks_(num_blocks),
      num_key_tails_(format_.has_key_tails() ? num_key_tails : 0) {
  HostKvAllocator host;
  allocate_pools(host);
}

KvStorage::KvStorage(const KvCacheSpec& spec, size_t num_blocks, size_t num_key_tails, KvAllocator& allocator)
    : spec_(spec),
      format_(kv_format(spec)),
      num_blocks_(num_blocks),
      num_key_tails_(format_.has_key_tails() ? num_key_tails : 0) {
  allocate_pools(allocator);
}

void KvStorage::allocate_pools(KvAllocator& allocator) {
  const Status valid = spec_.validate();
  KVS_ASSERT(valid.is_ok(), "KV storage of an invalid spec: {}", valid.message());
  keys_ = allocate(format_.k, allocator);
  if (format_.v) values_ = allocate(*format_.v, allocator);
  if (num_key_tails_ > 0) key_tails_ = allocator.allocate(num_key_tails_ * format_.key_tail_bytes());
  // The pools are the calculator's bytes exactly, so its prediction is this allocation.
  const size_t predicted = num_blocks_ * kv_bytes_per_block(spec_).total() + num_key_tails_ * kv_key_tail_bytes(spec_);
  KVS_ASSERT(bytes() == predicted, "allocated {} bytes, sizing says {}", bytes(), predicted);
}

KvStorage::Pools KvStorage::allocate(const KvTensorFormat& format, KvAllocator& allocator) const {
  Pools pools{.format = format};
  const size_t bytes = num_blocks_ * format_.pool_bytes_per_block(format);
  for (size_t l = 0; l < format_.num_layers; ++l) {
    pools.layers.push_back(allocator.allocate(bytes));
    const std::span<std::byte> region = pools.layers.back()->bytes();
    KVS_ASSERT(region.size() == bytes, "the KV allocator returned {} bytes of the {} asked for", region.size(), bytes);
    pools.base.push_back(region.data());
  }
  return pools;
}

void KvStorage::copy_slots(BlockId source, BlockId destination, size_t num_slots) {
  KVS_ASSERT(source.value < num_blocks_ && destination.value < num_blocks_ && num_slots <= spec_.block_size,
             "copy of {} slots from block {} to block {} in a pool of {} blocks of {}", num_slots, source.value,
             destination.value, num_blocks_, spec_.block_size);
  if (num_slots == 0) return;  // moves nothing, scales included
  for (const Pools* pools : {&keys_, &values_}) {
    const KvTensorFormat& f = pools->format;
    for (size_t l = 0; l < pools->base.size(); ++l) {
      for (size_t h = 0; h < format_.num_heads; ++h) {
        const std::byte* from = head_block(*pools, l, source, h);
        std::byte* to = head_block(*pools, l, destination, h);
        std::memcpy(to, from, num_slots * f.row_bytes());
        std::memcpy(to + f.data_bytes(), from + f.data_bytes(), f.scales_bytes());
      }
    }
  }
}

size_t KvStorage::block_bytes() const {
  return format_.num_layers *
         (format_.pool_bytes_per_block(keys_.format) + (format_.v ? format_.pool_bytes_per_block(values_.format) : 0));
}

template <typename Visit>
void KvStorage::for_each_block_part(BlockId block, size_t expected_bytes, Visit visit) const {
  KVS_ASSERT(block.value < num_blocks_ && expected_bytes == block_bytes(),
             "block {} of a pool of {} moved as {} bytes (a block has {})", block.value, num_blocks_, expected_bytes,
             block_bytes());
  size_t offset = 0;
  for (size_t l = 0; l < format_.num_layers; ++l) {
    for (const Pools* pools : {&keys_, &values_}) {
      if (pools->base.empty()) continue;
      const size_t part = format_.pool_bytes_per_block(pools->format);  // the block's head-blocks, back to back
      visit(head_block(*pools, l, block, 0), offset, part);
      offset += part;
    }
  }
}

void KvStorage::read_block(BlockId block, std::span<std::byte> out) const {
  for_each_block_part(block, out.size(),
                      [&](const std::byte* at, size_t offset, size_t n) { std::memcpy(out.data() + offset, at, n); });
}

void KvStorage::write_block(BlockId block, std::span<const std::byte> bytes) {
  for_each_block_part(block, bytes.size(),
                      [&](std::byte* at, size_t offset, size_t n) { std::memcpy(at, bytes.data() + offset, n); });
}

size_t KvStorage::bytes() const {
  size_t total = 0;
  for (const Pools* pools : {&keys_, &values_}) {
    for (const auto& region : pools->layers) total += region->bytes().size();
  }
  return total + (key_tails_ ? key_tails_->bytes().size() : 0);
}

size_t KvStorage::key_tail_offset(uint32_t tail, size_t layer, size_t kv_head) const {
  KVS_ASSERT(tail < num_key_tails_ && layer < format_.num_layers && kv_head < format_.num_heads,
             "key tail {} of {}, layer {} of {}, head {} of {}", tail, num_key_tails_, layer, format_.num_layers,
             kv_head, format_.num_heads);
  return ((tail * format_.num_layers + layer) * format_.num_heads + kv_head) * format_.k.group_size * format_.k.width;
}

uint16_t* KvStorage::key_tail(uint32_t tail, size_t layer, size_t kv_head) {
  return reinterpret_cast<uint16_t*>(key_tails_->bytes().data()) + key_tail_offset(tail, layer, kv_head);
}

KvRows KvStorage::key_tail_rows(uint32_t tail, size_t layer, size_t kv_head) const {
  const auto* base = reinterpret_cast<const uint16_t*>(key_tails_->bytes().data());
  return {.data = base + key_tail_offset(tail, layer, kv_head), .type = KvDType::kF16, .rotated = format_.k.rotated};
}

void KvStorage::copy_key_tail(uint32_t source, uint32_t destination) {
  KVS_ASSERT(source < num_key_tails_ && destination < num_key_tails_, "copy of key tail {} to {} of {}", source,
             destination, num_key_tails_);
  const size_t bytes = format_.key_tail_bytes();
  std::byte* base = key_tails_->bytes().data();
  std::memcpy(base + destination * bytes, base + source * bytes, bytes);
}

std::byte* KvStorage::head_block(const Pools& pools, size_t layer, BlockId block, size_t kv_head) const {
  KVS_ASSERT(layer < pools.base.size(), "layer {} of {} (or a value pool of an MLA latent)", layer, pools.base.size());
  return pools.base[layer] + (block.value * format_.num_heads + kv_head) * pools.format.head_block_bytes();
}

KvRows KvStorage::rows(const Pools& pools, size_t layer, BlockId block, size_t kv_head) const {
  const KvTensorFormat& f = pools.format;
  const std::byte* data = head_block(pools, layer, block, kv_head);
  return {.data = data,
          .type = f.element,
          .scales = f.scale_count() ? reinterpret_cast<const uint16_t*>(data + f.data_bytes()) : nullptr,
          .axis = f.scale_axis,
          .group_size = f.group_size,
          .rotated = f.rotated};
}

std::byte* KvStorage::row(Pools& pools, size_t layer, KvSlot slot, size_t kv_head) {
  KVS_ASSERT(slot.value < token_capacity(), "slot {} beyond capacity {}", slot.value, token_capacity());
  KVS_ASSERT(kv_head < format_.num_heads, "kv head {} of {}", kv_head, format_.num_heads);
  const BlockId block{static_cast<uint32_t>(slot.value / spec_.block_size)};
  return head_block(pools, layer, block, kv_head) + (slot.value % spec_.block_size) * pools.format.row_bytes();
}

}  // namespace kvs
