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

// x, or H x in `scratch` for keys stored rotated.
const float* stored_form(const KvTensorFormat& f, const float* x, std::vector<float>& scratch) {
  if (!f.rotated) return x;
  scratch.assign(x, x + f.width);
  hadamard_transform(scratch.data(), f.width);
  return scratch.data();
}

// Rows [first_row, first_row + count) of a per-channel head-block, row t at keys + t * stride: each
// staged in fp16 as row (first_row + t) % group_size of `tail` (the block's key tail; `staging` when the
// run writes whole groups only), and each group quantized from its staged rows when its last row is written.
void store_rows_per_channel(const KvTensorFormat& f, std::byte* head_block, size_t first_row, size_t count,
                            const float* keys, size_t stride, uint16_t* tail, std::vector<uint16_t>& staging,
                            std::vector<float>& scratch, Isa isa) {
  const size_t group = f.group_size, width = f.width, end = first_row + count;
  const bool ends_in_group = f.tail_rows(end) != 0;
  KVS_ASSERT(tail != nullptr || (first_row % group == 0 && !ends_in_group),
             "rows [{}, {}) of a block of {} in per-channel groups of {}: a filling group needs a key tail", first_row,
             end, f.rows, group);
  if (tail == nullptr) {
    staging.resize(group * width);
    tail = staging.data();
  }
  auto* data = reinterpret_cast<uint8_t*>(head_block);
  auto* scales = reinterpret_cast<uint16_t*>(head_block + f.data_bytes());
  for (size_t t = 0; t < count; ++t) {
    const size_t row = first_row + t, i = row % group;
    store_kv_row(KvDType::kF16, stored_form(f, keys + t * stride, scratch), tail + i * width, width, isa);
    if (i + 1 == group || row + 1 == f.rows) {
      quantize_group_per_channel(f.element, tail, i + 1, width, data + (row - i) * f.row_bytes(),
                                 scales + row / group * 2 * width);
    }
  }
}

}  // namespace

void store_row(const KvTensorFormat& f, std::byte* head_block, size_t row, const float* x, Isa isa) {
  KVS_ASSERT(f.scale_axis != KvScaleAxis::kPerChannel, "a row stored alone in per-channel groups");
  auto* data = reinterpret_cast<uint8_t*>(head_block);
  if (f.scale_axis == KvScaleAxis::kNone) return store_kv_row(f.element, x, data + row * f.row_bytes(), f.width, isa);
  quantize_row_per_token(f.element, x, f.width, f.group_size, data + row * f.row_bytes(),
                         reinterpret_cast<uint16_t*>(head_block + f.data_bytes()) + row * 2 * (f.width / f.group_size));
}

void write_kv_run(KvStorage& kv, size_t layer, KvSlot first_slot, size_t count, std::span<const float> k,
                  std::span<const float> v, uint32_t key_tail, Isa isa) {
  const KvFormat& format = kv.format();
  KVS_ASSERT(format.v.has_value() || v.empty(), "an MLA latent has no values: {} value floats given", v.size());
  const size_t heads = format.num_heads, kw = format.k.width, vw = format.v ? format.v->width : 0;
  KVS_ASSERT(layer < format.num_layers, "layer {} out of {} layers", layer, format.num_layers);
  KVS_ASSERT(k.size() == count * heads * kw && v.size() == count * heads * vw,
             "K/V of {} tokens must have {} and {} floats, got {} and {}", count, count * heads * kw,
             count * heads * vw, k.size(), v.size());
  const size_t bs = kv.block_size();
  KVS_ASSERT(count == 0 || first_slot.value % bs + count <= bs, "a run of {} slots from slot {} leaves its block of {}",
             count, first_slot.value, bs);
  if (count == 0) return;
  const BlockId block{static_cast<uint32_t>(first_slot.value / bs)};
  const size_t first_row = first_slot.value % bs;
  std::vector<float> scratch;
  std::vector<uint16_t> staging;
  for (size_t h = 0; h < heads; ++h) {
    std::byte* keys = kv.key_head_block(layer, block, h);
    if (format.k.scale_axis == KvScaleAxis::kPerChannel) {
      uint16_t* tail = key_tail == kNoKeyTail ? nullptr : kv.key_tail(key_tail, layer, h);
      store_rows_per_channel(format.k, keys, first_row, count, &k[h * kw], heads * kw, tail, staging, scratch, isa);
    } else {
      for (size_t t = 0; t < count; ++t)
        store_row(format.k, keys, first_row + t, stored_form(format.k, &k[(t * heads + h) * kw], scratch), isa);
    }
    if (!format.v) continue;
    std::byte* values = kv.value_head_block(layer, block, h);
    for (size_t t = 0; t < count; ++t) store_row(*format.v, values, first_row + t, &v[(t * heads + h) * vw], isa);
  }
}

}  // namespace kvs
