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
        mass_(num_layers * num_kv_heads * capacity, 0),
        births_(mass_.size(), 0) {}

  size_t num_rows() const { return num_layers_ * num_kv_heads_; }
  size_t capacity() const { return capacity_; }
  SlotMass view() { return {.data = mass_.data(), .num_kv_heads = num_kv_heads_, .capacity = capacity_}; }
  // Row r = layer * num_kv_heads + kv_head: its accumulated mass per slot (kSlotMassOne per unit).
  std::span<const uint64_t> row(size_t r) const { return {&mass_[r * capacity_], capacity_}; }

  // Records the positions of slots written since the last compaction: slot s (< num_slots) of a sequence that
  // has evicted `num_evicted` tokens holds position s + num_evicted (kept tokens fill the slots before them).
  void stamp(size_t num_slots, size_t num_evicted);
  // Ranking scores of the first num_slots slots of row r, or of every row summed (`all_rows`), once num_tokens
  // tokens are computed: the accumulated mass (H2O), or with per_query that mass over the queries that could
  // attend to the slot since it was written (num_tokens - its position), which does not favour old tokens.
  // Slots must be stamped.
  void scores(size_t r, bool all_rows, size_t num_slots, size_t num_tokens, bool per_query,
              std::vector<double>& out) const;
  // Each row keeps its slots kept[r] (ascending; one set for every row when kept.size() == 1), the j-th
  // moving to slot j with its mass and position; the slots after them start empty.
  void compact(std::span<const std::vector<uint32_t>> kept);
  void clear();

 private:
  size_t num_layers_, num_kv_heads_, capacity_;
  std::vector<uint64_t> mass_;    // [layer][kv_head][capacity]
  std::vector<uint64_t> births_;  // [layer][kv_head][capacity]: the position each slot's token has in its sequence
  size_t stamped_ = 0;            // slots [0, stamped_) of every row have their position
};

}  // namespace kvs
