// A view of cached K or V rows: rows of `width` elements of `type`, back to back (the width is the
// reader's to know). What the KV storage hands out and the attention kernels read.
#pragma once

#include "core/kv_dtype.h"

namespace kvs {

struct KvRows {
  const void* data = nullptr;
  KvDType type = KvDType::kF32;
};

}  // namespace kvs
