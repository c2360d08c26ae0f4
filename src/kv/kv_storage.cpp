#include "kv/kv_storage.h"

#include <cstring>

#include "core/status.h"

namespace kvs {

KvStorage::KvStorage(const KvShape& shape) : shape_(shape) {
  KVS_ASSERT(shape.num_layers > 0 && shape.num_kv_heads > 0 && shape.head_dim > 0 && shape.block_size > 0,
             "KV shape must be positive: layers {}, kv heads {}, head dim {}, block size {}", shape.num_layers,
             shape.num_kv_heads, shape.head_dim, shape.block_size);
  // Pool sizes come from the calculator's sizing function, so its prediction is this allocation.
  const size_t pool_floats = shape.num_blocks * kv_pool_bytes_per_block(shape.spec()) / sizeof(float);
  KVS_ASSERT(pool_floats == shape.num_blocks * shape.floats_per_block(), "sizing says {} floats per pool, layout {}",
             pool_floats, shape.num_blocks * shape.floats_per_block());
  keys_.reserve(shape.num_layers);
  values_.reserve(shape.num_layers);
  // Huge pages where the kernel grants them: attention reads blocks all over a pool of up to gigabytes.
  for (size_t l = 0; l < shape.num_layers; ++l) {
    keys_.emplace_back(pool_floats, PageHint::kHuge);
    values_.emplace_back(pool_floats, PageHint::kHuge);
  }
}

size_t KvStorage::bytes() const {
  size_t total = 0;
  for (size_t l = 0; l < shape_.num_layers; ++l) total += (keys_[l].size() + values_[l].size()) * sizeof(float);
  return total;
}

void KvStorage::write(size_t layer, KvSlot slot, std::span<const float> k, std::span<const float> v) {
  const size_t hd = shape_.head_dim;
  KVS_ASSERT(layer < shape_.num_layers, "layer {} out of {} layers", layer, shape_.num_layers);
  KVS_ASSERT(slot.value < shape_.token_capacity(), "slot {} beyond capacity {}", slot.value, shape_.token_capacity());
  KVS_ASSERT(k.size() == shape_.num_kv_heads * hd && v.size() == k.size(),
             "K/V of one token must have {} floats, got {} and {}", shape_.num_kv_heads * hd, k.size(), v.size());
  const BlockId block{static_cast<uint32_t>(slot.value / shape_.block_size)};
  const size_t in_block = slot.value % shape_.block_size;
  for (size_t h = 0; h < shape_.num_kv_heads; ++h) {
    const size_t dst = offset(block, h) + in_block * hd;
    std::memcpy(keys_[layer].data() + dst, k.data() + h * hd, hd * sizeof(float));
    std::memcpy(values_[layer].data() + dst, v.data() + h * hd, hd * sizeof(float));
  }
}

}  // namespace kvs
