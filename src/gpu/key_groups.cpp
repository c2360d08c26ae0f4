#include "gpu/key_groups.h"

#include <algorithm>

#include "attention/write_kv.h"
#include "core/status.h"

namespace kvs {

KeyGroupPlan plan_key_groups(const KvTensorFormat& k, std::span<const KvSlot> slots,
                             std::span<const uint32_t> key_tails) {
  KVS_ASSERT(k.scale_axis == KvScaleAxis::kPerChannel && k.group_size > 0, "a key group plan for keys not per channel");
  KeyGroupPlan plan;
  plan.tail_of_token.assign(slots.size(), kNoKeyTail);
  const size_t block_size = k.rows, group = k.group_size;
  for (const KvWriteRun& run : kv_write_runs(slots, block_size)) {
    const size_t block = slots[run.first].value / block_size, first_row = slots[run.first].value % block_size;
    const size_t end = first_row + run.count;  // rows [first_row, end) of the block
    const uint32_t tail = block < key_tails.size() ? key_tails[block] : kNoKeyTail;
    for (size_t start = first_row - first_row % group; start < end; start += group) {
      const size_t group_end = std::min(start + group, block_size);
      const size_t from_tail = first_row > start ? first_row - start : 0;
      if (group_end > end) {  // still filling: the run's rows of it wait in the tail
        KVS_ASSERT(tail != kNoKeyTail,
                   "rows [{}, {}) of block {} in per-channel groups of {}: a filling group needs a "
                   "key tail",
                   first_row, end, block, group);
        for (size_t row = std::max(start, first_row); row < end; ++row)
          plan.tail_of_token[run.first + row - first_row] = tail;
        continue;
      }
      KVS_ASSERT(from_tail == 0 || tail != kNoKeyTail,
                 "block {}'s group of rows [{}, {}) began before the step "
                 "without a key tail",
                 block, start, group_end);
      const size_t first_token = run.first + start + from_tail - first_row;
      for (size_t word : {block, start, group_end - start, size_t{tail}, from_tail, first_token})
        plan.seals.push_back(static_cast<uint32_t>(word));
    }
  }
  return plan;
}

}  // namespace kvs
