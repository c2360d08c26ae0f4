// Heavy-hitter scores: the attention mass each cached slot of one sequence has received, per layer and
// KV head (summed over the query heads that read it and over every query since the slot was written).
// Attention adds to them (SlotMass, the view it is handed); the policy ranks them; a compaction moves
// them with their slots.
//
// Fixed point: a probability p adds round(p * kSlotMassOne) to a 64-bit integer, so the sums do not
// depend on the order in which threads add them (integer addition is associative): a sequence scores
// the same batched or alone, and a ranking never flips on the order of additions. 2^24 per unit keeps
// 6e-8 of resolution and room for 2^40 units (1M tokens x 1024 layer-heads x 8 query heads per KV head).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvs {

inline constexpr double kSlotMassOne = double(1 << 24);

// Where attention adds slot mass for one sequence: row (layer, kv_head) is `capacity` counters.
struct SlotMass {
  uint64_t* data = nullptr;  // null: no scores wanted
  size_t num_kv_heads = 0;
  size_t capacity = 0;
  explicit operator bool() const { return data != nullptr; }
  uint64_t* row(size_t layer, size_t kv_head) const { return data + (layer * num_kv_heads + kv_head) * capacity; }
};

class SlotScores {
 public:
  SlotScores(size_t num_layers, size_t num_kv_heads, size_t capacity)
      : num_layers_(num_layers),
        num_kv_heads_(num_kv_heads),
        capacity_(capacity),
        mass_(num_layers * num_kv_heads * capacity, 0) {}

  size_t num_rows() const { return num_layers_ * num_kv_heads_; }
  size_t capacity() const { return capacity_; }
  SlotMass view() { return {.data = mass_.data(), .num_kv_heads = num_kv_heads_, .capacity = capacity_}; }
  // Row r = layer * num_kv_heads + kv_head.
  std::span<const uint64_t> row(size_t r) const { return {&mass_[r * capacity_], capacity_}; }
  // out[s] = the sum over every row of slot s, for s < num_slots.
  void pooled(size_t num_slots, std::vector<uint64_t>& out) const;
  // Row r keeps the slots `kept` (ascending), the j-th moving to slot j; the slots after them start at 0.
  void compact(size_t r, std::span<const uint32_t> kept);
  void clear() { std::fill(mass_.begin(), mass_.end(), 0); }
  size_t bytes() const { return mass_.size() * sizeof(uint64_t); }

 private:
  size_t num_layers_, num_kv_heads_, capacity_;
  std::vector<uint64_t> mass_;  // [layer][kv_head][capacity]
};

}  // namespace kvs
