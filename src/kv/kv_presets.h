// Known model shapes for the calculator (`kvserve calc --preset`).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "kv/kv_sizing.h"

namespace kvs {

struct KvModelPreset {
  std::string_view name;
  KvCacheSpec spec;  // dtype/block size left at their defaults
  size_t context_length;
};
const std::vector<KvModelPreset>& kv_model_presets();

}  // namespace kvs
