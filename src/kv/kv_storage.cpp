#include "kv/kv_storage.h"

#include "core/status.h"

namespace kvs {

std::optional<DType> kv_element_type(KvDType type) {
  switch (type) {
    case KvDType::kF32: return DType::kF32;
    case KvDType::kF16: return DType::kF16;
    case KvDType::kBF16: return DType::kBF16;
    default: return std::nullopt;
  }
}

KvStorage::KvStorage(const KvShape& shape) : shape_(shape) {
  KVS_ASSERT(shape.num_layers > 0 && shape.num_kv_heads > 0 && shape.head_dim > 0 && shape.block_size > 0,
             "KV shape must be positive: layers {}, kv heads {}, head dim {}, block size {}", shape.num_layers,
             shape.num_kv_heads, shape.head_dim, shape.block_size);
  const std::optional<DType> element = kv_element_type(shape.dtype);
  KVS_ASSERT(element.has_value(), "KV storage holds f32, f16 or bf16 elements, not {}", kv_dtype_name(shape.dtype));
  element_type_ = *element;
  element_bytes_ = dtype_row_bytes(element_type_, 1);
  head_block_bytes_ = shape.block_size * shape.head_dim * element_bytes_;
  // Pool sizes come from the calculator's sizing function, so its prediction is this allocation.
  const size_t pool_bytes = shape.num_blocks * kv_pool_bytes_per_block(shape.spec());
  KVS_ASSERT(pool_bytes == shape.num_blocks * shape.elements_per_block() * element_bytes_,
             "sizing says {} bytes per pool, layout {}", pool_bytes,
             shape.num_blocks * shape.elements_per_block() * element_bytes_);
  keys_.reserve(shape.num_layers);
  values_.reserve(shape.num_layers);
  // Huge pages where the kernel grants them: attention reads blocks all over a pool of up to gigabytes.
  for (size_t l = 0; l < shape.num_layers; ++l) {
    keys_.emplace_back(pool_bytes, PageHint::kHuge);
    values_.emplace_back(pool_bytes, PageHint::kHuge);
  }
}

size_t KvStorage::bytes() const {
  size_t total = 0;
  for (size_t l = 0; l < shape_.num_layers; ++l) total += keys_[l].size() + values_[l].size();
  return total;
}

size_t KvStorage::row_offset(KvSlot slot, size_t kv_head) const {
  KVS_ASSERT(slot.value < shape_.token_capacity(), "slot {} beyond capacity {}", slot.value, shape_.token_capacity());
  KVS_ASSERT(kv_head < shape_.num_kv_heads, "kv head {} of {}", kv_head, shape_.num_kv_heads);
  const BlockId block{static_cast<uint32_t>(slot.value / shape_.block_size)};
  return byte_offset(block, kv_head) + (slot.value % shape_.block_size) * shape_.head_dim * element_bytes_;
}

}  // namespace kvs
