#include "kv/kv_format.h"

#include <algorithm>

namespace kvs {
namespace {

constexpr size_t kScaleBytes = 4;         // (scale, min) as two fp16
constexpr size_t kChannelGroupRows = 16;  // rows sharing a per-channel pair
constexpr size_t kTokenGroup = 32;        // elements of a row sharing a per-token pair

KvTensorFormat tensor_format(KvDType element, KvScaleAxis axis, size_t width, size_t rows) {
  KvTensorFormat t{.element = element, .width = width, .rows = rows};
  if (kv_dtype_quantized(element)) {
    t.scale_axis = axis;
    t.group_size = axis == KvScaleAxis::kPerChannel ? std::min(rows, kChannelGroupRows)
                                                    : (width % kTokenGroup == 0 ? kTokenGroup : width);
    t.scale_bytes = kScaleBytes;
  }
  return t;
}

KvTensorFormat key_format(const KvCacheSpec& s) {
  KvTensorFormat k = tensor_format(s.dtype.k, s.key_scale_axis, s.head_dim, s.block_size);
  k.rotated = s.rotate_keys;
  return k;
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
          .k = key_format(s),
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
