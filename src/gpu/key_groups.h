// Keys quantized per channel on the GPU (kv/kv_format.h): what one step's KV write does with each key row. A group
// of rows shares a (scale, min) pair per channel, so it is quantized once, when its last row is written, from its
// rows in fp16; the rows of a group still filling after the step wait in their block's key tail
// (kv/key_tail_table.h), where attention reads them. The CPU's write path (attention/write_kv.cpp) does the same
// row by row; the device does it in two dispatches, the tails' rows (shaders/key_tail_write.comp) and the groups the
// step completes (shaders/key_seal.comp), which this plan feeds.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ids.h"
#include "kv/kv_format.h"

namespace kvs {

struct KeyGroupPlan {
  static constexpr size_t kSealWords = 6;
  // [tokens] the key tail token t's row waits in (its group is still filling after the step), or kNoKeyTail.
  std::vector<uint32_t> tail_of_token;
  // Per group the step completes, kSealWords words: block, first row of the group in the block, its rows, the
  // block's key tail (kNoKeyTail: none), how many of its first rows are in that tail (written by earlier steps),
  // and the batch token holding the row after them.
  std::vector<uint32_t> seals;
  size_t num_seals() const { return seals.size() / kSealWords; }
};

// The plan for a batch whose token t writes slot slots[t] (blocks of k.rows slots) with keys in format `k` (per
// channel); key_tails: [block id] -> its tail or kNoKeyTail (the KV manager's). Asserts, as the CPU's write path does,
// that a group still filling after the step, or begun before it, has a tail.
KeyGroupPlan plan_key_groups(const KvTensorFormat& k, std::span<const KvSlot> slots,
                             std::span<const uint32_t> key_tails);

}  // namespace kvs
