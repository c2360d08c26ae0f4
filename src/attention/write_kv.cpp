#include "attention/write_kv.h"

#include <algorithm>

#include "core/status.h"
#include "tensor/attention_ops.h"
#include "tensor/kv_quant.h"

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

namespace {

// Stores x as row `row` of a head-block of format `f`: floats as they are, quantized rows with their
// scales (per channel: widening the group's ranges). Rotated keys are stored as H x (`scratch`: width floats).
void store_row(const KvTensorFormat& f, std::byte* head_block, size_t row, const float* x, std::vector<float>& scratch,
               Isa isa) {
  if (f.rotated) {
    scratch.assign(x, x + f.width);
    hadamard_transform(scratch.data(), f.width);
    x = scratch.data();
  }
  auto* data = reinterpret_cast<uint8_t*>(head_block);
  auto* scales = reinterpret_cast<uint16_t*>(head_block + f.data_bytes());
  switch (f.scale_axis) {
    case KvScaleAxis::kNone: return store_kv_row(f.element, x, data + row * f.row_bytes(), f.width, isa);
    case KvScaleAxis::kPerToken:
      return quantize_row_per_token(f.element, x, f.width, f.group_size, data + row * f.row_bytes(),
                                    scales + row * 2 * (f.width / f.group_size));
    case KvScaleAxis::kPerChannel:
      return append_row_per_channel(f.element, x, f.width, f.group_size, row, data, scales);
  }
}

}  // namespace

void write_kv_run(KvStorage& kv, size_t layer, KvSlot first_slot, size_t count, std::span<const float> k,
                  std::span<const float> v, Isa isa) {
  const KvFormat& format = kv.format();
  KVS_ASSERT(format.v.has_value(), "write_kv_run stores K and V; this storage holds an MLA latent");
  const size_t heads = format.num_heads, kw = format.k.width, vw = format.v->width;
  KVS_ASSERT(layer < format.num_layers, "layer {} out of {} layers", layer, format.num_layers);
  KVS_ASSERT(k.size() == count * heads * kw && v.size() == count * heads * vw,
             "K/V of {} tokens must have {} and {} floats, got {} and {}", count, count * heads * kw,
             count * heads * vw, k.size(), v.size());
  const size_t bs = kv.block_size();
  KVS_ASSERT(count == 0 || first_slot.value % bs + count <= bs, "a run of {} slots from slot {} leaves its block of {}",
             count, first_slot.value, bs);
  if (count == 0) return;
  const BlockId block{static_cast<uint32_t>(first_slot.value / bs)};
  std::vector<float> scratch;
  for (size_t h = 0; h < heads; ++h) {
    std::byte* keys = kv.key_head_block(layer, block, h);
    std::byte* values = kv.value_head_block(layer, block, h);
    for (size_t t = 0; t < count; ++t) {
      const size_t row = first_slot.value % bs + t;
      store_row(format.k, keys, row, &k[(t * heads + h) * kw], scratch, isa);
      store_row(*format.v, values, row, &v[(t * heads + h) * vw], scratch, isa);
    }
  }
}

}  // namespace kvs
