#include "kv/kv_format.h"

namespace kvs {
namespace {

constexpr size_t kScaleBytes = 2;  // an fp16 scale per group

KvTensorFormat tensor_format(KvDType element, KvScaleAxis axis, size_t width, size_t rows) {
  KvTensorFormat t{.element = element, .width = width, .rows = rows};
  if (kv_dtype_quantized(element)) {
    t.scale_axis = axis;
    t.group_size = axis == KvScaleAxis::kPerChannel ? rows : width;
    t.scale_bytes = kScaleBytes;
  }
  return t;
}

}  // namespace

KvFormat kv_format(const KvCacheSpec& s) {
  if (s.mla) {
    return {.num_layers = s.num_layers,
            .num_heads = 1,
            .k = tensor_format(s.dtype.k, KvScaleAxis::kPerToken, s.kv_lora_rank + s.rope_dim, s.block_size)};
  }
  return {.num_layers = s.num_layers,
          .num_heads = s.num_kv_heads,
          .k = tensor_format(s.dtype.k, KvScaleAxis::kPerChannel, s.head_dim, s.block_size),
          .v = tensor_format(s.dtype.v, KvScaleAxis::kPerToken, s.value_width(), s.block_size)};
}

size_t KvFormat::data_bytes_per_block() const {
  const size_t per_layer = num_heads * (k.data_bytes() + (v ? v->data_bytes() : 0));
  return num_layers * per_layer;
}

size_t KvFormat::scales_bytes_per_block() const {
  const size_t per_layer = num_heads * (k.scales_bytes() + (v ? v->scales_bytes() : 0));
  return num_layers * per_layer;
}

}  // namespace kvs
