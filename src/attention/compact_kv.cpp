#include "attention/compact_kv.h"

#include <cstring>

#include "attention/write_kv.h"
#include "core/status.h"
#include "tensor/attention_ops.h"
#include "tensor/kv_quant.h"
#include "tensor/ops.h"

namespace kvs {
namespace {

// Row `row` of a head-block copied, with its per-token scales, into row `to` of another: every bit.
void copy_row(const KvTensorFormat& f, const std::byte* from_block, size_t row, std::byte* to_block, size_t to) {
  std::memcpy(to_block + to * f.row_bytes(), from_block + row * f.row_bytes(), f.row_bytes());
  if (f.scale_axis == KvScaleAxis::kPerToken) {
    const size_t pair_bytes = 2 * (f.width / f.group_size) * sizeof(uint16_t);
    std::memcpy(to_block + f.data_bytes() + to * pair_bytes, from_block + f.data_bytes() + row * pair_bytes,
                pair_bytes);
  }
}

}  // namespace

void read_kv_row(const KvTensorFormat& f, const KvRows& rows, size_t row, float* out) {
  KvRows one = rows;
  one.data = static_cast<const std::byte*>(rows.data) + row * f.row_bytes();
  if (f.scale_axis == KvScaleAxis::kPerToken) one.scales = rows.scales + row * 2 * (f.width / f.group_size);
  const float probability = 1.0f;
  std::fill_n(out, f.width, 0.0f);
  attention_block_values(&probability, 1, 1, one, 1, f.width, out);  // out = 1 x the row: exact
}

namespace {

// Rotations by a number of positions, the angles of the last one kept (a compaction moves runs of keys by the
// same distance: all of them, under sinks or a window).
class KeyShifter {
 public:
  explicit KeyShifter(const KeyRotation& rotation)
      : rotation_(rotation), cos_(rotation.inv_freq.size()), sin_(rotation.inv_freq.size()) {}
  void shift(std::span<float> x, long delta) {
    if (cos_.empty() || delta == 0) return;
    if (delta != delta_) {
      rope_cos_sin(static_cast<size_t>(delta < 0 ? -delta : delta), rotation_.inv_freq, cos_, sin_);
      if (delta < 0)
        for (float& s : sin_) s = -s;  // R(-a): cos(-a) = cos(a), sin(-a) = -sin(a)
      delta_ = delta;
    }
    if (rotation_.neox) {
      rope_neox(x, 1, x.size(), cos_, sin_);
    } else {
      rope_interleaved(x, 1, x.size(), cos_, sin_);
    }
  }

 private:
  const KeyRotation& rotation_;
  std::vector<float> cos_, sin_;
  long delta_ = 0;
};

}  // namespace

void shift_key(std::span<float> x, long delta, const KeyRotation& rotation) { KeyShifter(rotation).shift(x, delta); }

void compact_kv(KvStorage& kv, std::span<const BlockId> blocks, std::span<const std::vector<uint32_t>> kept,
                const KeyRotation& rotation) {
  const KvFormat& format = kv.format();
  KVS_ASSERT(format.v.has_value() && format.k.scale_axis != KvScaleAxis::kPerChannel,
             "compaction moves K and V rows one at a time: keys grouped per channel (or an MLA latent) cannot");
  const size_t heads = format.num_heads, bs = kv.block_size(), width = format.k.width;
  KVS_ASSERT(kept.size() == 1 || kept.size() == format.num_layers * heads, "{} kept sets for {} layers x {} heads",
             kept.size(), format.num_layers, heads);
  std::vector<float> key(width);
  KeyShifter shifter(rotation);
  for (size_t layer = 0; layer < format.num_layers; ++layer) {
    for (size_t h = 0; h < heads; ++h) {
      const std::vector<uint32_t>& rows = kept.size() == 1 ? kept[0] : kept[layer * heads + h];
      // Ascending, and rows[j] >= j: the j-th kept slot is read before anything is written over it.
      for (size_t j = 0; j < rows.size(); ++j) {
        const size_t from = rows[j];
        KVS_ASSERT(from >= j && (j == 0 || from > rows[j - 1]), "kept slots must ascend: {} at {}", from, j);
        if (from == j) continue;
        const BlockId src = blocks[from / bs], dst = blocks[j / bs];
        KVS_ASSERT(src != kNullBlock && dst != kNullBlock, "compaction through a hole (slot {} to {})", from, j);
        copy_row(*format.v, kv.value_head_block(layer, src, h), from % bs, kv.value_head_block(layer, dst, h), j % bs);
        if (rotation.inv_freq.empty()) {
          copy_row(format.k, kv.key_head_block(layer, src, h), from % bs, kv.key_head_block(layer, dst, h), j % bs);
          continue;
        }
        // The key as fp32 before any Hadamard rotation, re-rotated by j - from, stored back in its form.
        read_kv_row(format.k, kv.keys(layer, src, h), from % bs, key.data());
        if (format.k.rotated) hadamard_transform(key.data(), width);  // H is its own inverse
        shifter.shift(key, static_cast<long>(j) - static_cast<long>(from));
        if (format.k.rotated) hadamard_transform(key.data(), width);
        store_row(format.k, kv.key_head_block(layer, dst, h), j % bs, key.data());
      }
    }
  }
}

}  // namespace kvs
