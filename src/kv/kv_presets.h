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
  size_t sliding_window = 0;  // > 0: interleaved windows (kv_layer_groups.h), 1 global layer per window_pattern
  size_t window_pattern = 0;  // 0 with a window: every layer windowed
};
const std::vector<KvModelPreset>& kv_model_presets();

}  // namespace kvs
