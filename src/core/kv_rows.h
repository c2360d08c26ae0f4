// A view of cached K or V rows: `count` rows of `head_dim` elements of `type` (kF32, kF16 or kBF16),
// back to back. What the KV storage hands out and the attention kernels read.
#pragma once

#include "core/dtype.h"

namespace kvs {

struct KvRows {
  const void* data = nullptr;
  DType type = DType::kF32;
};

}  // namespace kvs
