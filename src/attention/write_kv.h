// The write path of the KV cache: one token's new K and V (fp32, from the projections) scattered
// into its slot of a layer, rounded to the storage's element type (round to nearest even).
#pragma once

#include <span>

#include "kv/kv_storage.h"
#include "tensor/isa.h"

namespace kvs {

// k, v: [num_kv_heads][head_dim] fp32. Safe to call for distinct slots from several threads at once.
void write_kv(KvStorage& kv, size_t layer, KvSlot slot, std::span<const float> k, std::span<const float> v,
              Isa isa = best_isa());

}  // namespace kvs
