#include "attention/write_kv.h"

#include "core/status.h"
#include "tensor/attention_ops.h"

namespace kvs {

void write_kv(KvStorage& kv, size_t layer, KvSlot slot, std::span<const float> k, std::span<const float> v, Isa isa) {
  const KvShape& shape = kv.shape();
  const size_t hd = shape.head_dim;
  KVS_ASSERT(layer < shape.num_layers, "layer {} out of {} layers", layer, shape.num_layers);
  KVS_ASSERT(k.size() == shape.num_kv_heads * hd && v.size() == k.size(),
             "K/V of one token must have {} floats, got {} and {}", shape.num_kv_heads * hd, k.size(), v.size());
  for (size_t h = 0; h < shape.num_kv_heads; ++h) {
    store_kv_row(kv.element_type(), k.data() + h * hd, kv.key_row(layer, slot, h), hd, isa);
    store_kv_row(kv.element_type(), v.data() + h * hd, kv.value_row(layer, slot, h), hd, isa);
  }
}

}  // namespace kvs
