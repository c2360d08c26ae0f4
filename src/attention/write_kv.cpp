#include "attention/write_kv.h"

#include <algorithm>

#include "core/status.h"
#include "tensor/attention_ops.h"

namespace kvs {

std::vector<KvWriteRun> kv_write_runs(std::span<const KvSlot> slots, size_t block_size) {
  std::vector<KvWriteRun> runs;
  for (size_t t = 0; t < slots.size(); ++t) {
    const size_t slot = slots[t].value;
    const bool extends = !runs.empty() && slots[t - 1].value + 1 == slot && slot % block_size != 0;
    if (extends) {
      ++runs.back().count;
    } else {
      runs.push_back({.first = t, .count = 1});
    }
  }
  std::vector<size_t> blocks(runs.size());
  for (size_t r = 0; r < runs.size(); ++r) blocks[r] = slots[runs[r].first].value / block_size;
  std::sort(blocks.begin(), blocks.end());
  const auto twice = std::adjacent_find(blocks.begin(), blocks.end());
  KVS_ASSERT(twice == blocks.end(), "block {} is written by two runs of one batch", twice == blocks.end() ? 0 : *twice);
  return runs;
}

void write_kv_run(KvStorage& kv, size_t layer, KvSlot first_slot, size_t count, std::span<const float> k,
                  std::span<const float> v, Isa isa) {
  const KvFormat& format = kv.format();
  KVS_ASSERT(format.v.has_value(), "write_kv_run stores K and V; this storage holds an MLA latent");
  const size_t heads = format.num_heads, kw = format.k.width, vw = format.v->width;
  KVS_ASSERT(layer < format.num_layers, "layer {} out of {} layers", layer, format.num_layers);
  KVS_ASSERT(k.size() == count * heads * kw && v.size() == count * heads * vw,
             "K/V of {} tokens must have {} and {} floats, got {} and {}", count, count * heads * kw,
             count * heads * vw, k.size(), v.size());
  KVS_ASSERT(count == 0 || first_slot.value % kv.block_size() + count <= kv.block_size(),
             "a run of {} slots from slot {} leaves its block of {}", count, first_slot.value, kv.block_size());
  for (size_t t = 0; t < count; ++t) {
    const KvSlot slot{first_slot.value + t};
    for (size_t h = 0; h < heads; ++h) {
      store_kv_row(format.k.element, &k[(t * heads + h) * kw], kv.key_row(layer, slot, h), kw, isa);
      store_kv_row(format.v->element, &v[(t * heads + h) * vw], kv.value_row(layer, slot, h), vw, isa);
    }
  }
}

}  // namespace kvs
