#include "attention/batch_attention.h"

#include <algorithm>

#include "core/status.h"

namespace kvs {

void BatchAttention::run(const KvStorage& kv, size_t layer, const AttentionBatch& batch, std::span<const float> q,
                         std::span<float> out, size_t window) {
  const size_t n = batch.sequence_of_token.size(), heads = shape_.num_kv_heads;
  const size_t q_width = shape_.num_heads * shape_.head_dim, out_width = shape_.num_heads * shape_.value_width();
  KVS_ASSERT(batch.visible_slots.size() == n, "{} tokens but {} visible-slot counts", n, batch.visible_slots.size());
  KVS_ASSERT(q.size() >= n * q_width && out.size() >= n * out_width, "q {} / out {} floats for {} tokens of {} / {}",
             q.size(), out.size(), n, q_width, out_width);
  if (n == 0) return;
  // A token's first visible slot: the narrower of the layer's and its sequence's window, or 0.
  const auto first_slot = [&](size_t t) -> size_t {
    const size_t visible = batch.visible_slots[t];
    const size_t w = narrower_window(window, batch.sequences[batch.sequence_of_token[t]].window);
    return w > 0 && visible > w ? visible - w : 0;
  };
  // Work items: (token, KV head, part) in that order; an item costs its visible slots plus a fixed part. A KV head's
  // query heads go in `parts` slices of its group when the batch has fewer (token, KV head) pairs than threads
  // (batch-1 MQA or MLA decode: one pair), so that every thread has work; a head's result does not depend on its
  // slice. Never when slot mass is summed: a slot's mass over a group is rounded to fixed point once.
  constexpr size_t kFixedCost = 32;  // slots' worth of per-call work
  constexpr size_t kChunksPerThread = 4;
  constexpr size_t kMinSliceHeads = 4;  // the block kernels take four query heads per key load
  const size_t group = shape_.num_heads / heads, pairs = n * heads, threads = pool_.num_threads();
  const bool summing_mass = std::any_of(batch.sequences.begin(), batch.sequences.end(),
                                        [](const SequenceAttention& s) { return bool(s.slot_mass); });
  const size_t parts = summing_mass || pairs >= threads ? 1
                                                        : std::clamp((threads + pairs - 1) / pairs, size_t{1},
                                                                     std::max(size_t{1}, group / kMinSliceHeads));
  const size_t per_token = heads * parts;  // items of a token
  cost_.resize(n + 1);
  cost_[0] = 0;
  for (size_t t = 0; t < n; ++t) cost_[t + 1] = cost_[t] + batch.visible_slots[t] - first_slot(t) + kFixedCost;
  const size_t total = cost_[n] * per_token;
  // Cost of items [0, item): whole tokens before it, plus its token's items before it.
  const auto cost_before = [&](size_t item) {
    const size_t t = item / per_token, h = item % per_token;
    return cost_[t] * per_token + (t < n ? (cost_[t + 1] - cost_[t]) * h : 0);
  };
  // The first item whose preceding cost reaches `target` (cost_before grows with the item: binary search).
  const auto first_item_at = [&](size_t target) {
    size_t lo = 0, hi = n * per_token;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (cost_before(mid) < target)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  const size_t chunks = std::min(n * per_token, threads * kChunksPerThread);
  pool_.for_chunks(chunks, [&](size_t chunk, size_t thread) {
    std::vector<float>& scores = scores_[thread];
    const size_t begin = first_item_at(total * chunk / chunks);
    const size_t end = chunk + 1 == chunks ? n * per_token : first_item_at(total * (chunk + 1) / chunks);
    // The items of one token go in one call (KV heads [g_begin, g_end)), which reads each block of the
    // token's context as one stream; a slice of a group goes alone.
    for (size_t item = begin; item < end;) {
      const size_t t = item / per_token;
      const size_t g_begin = item % per_token / parts, part = item % per_token % parts;
      const size_t g_end = parts > 1 ? g_begin + 1 : std::min(per_token, g_begin + (end - item));
      const GroupSlice slice{.begin = group * part / parts, .end = group * (part + 1) / parts};
      const SequenceAttention& seq = batch.sequences[batch.sequence_of_token[t]];
      const size_t visible = batch.visible_slots[t];
      KVS_ASSERT(visible >= 1 && visible <= seq.num_cached, "token {} sees {} slots of a sequence holding {}", t,
                 visible, seq.num_cached);
      const size_t rows = (g_end - g_begin) * (slice.end - slice.begin);  // query heads of the call
      PagedContext context{
          .blocks = seq.blocks, .num_slots = visible, .first_slot = first_slot(t), .slot_mass = seq.slot_mass};
      const size_t per_row =
          paged_score_slots(context, kv.block_size()) + (kv.format().k.rotated ? shape_.head_dim : 0);
      if (scores.size() < rows * per_row) scores.resize(std::max(shape_.num_heads * per_row, 2 * scores.size()));
      if (const size_t tail_rows = kv.format().k.tail_rows(seq.num_cached); tail_rows > 0) {
        const BlockId block = seq.blocks[seq.num_cached / kv.block_size()];
        KVS_ASSERT(!batch.key_tails.empty() && batch.key_tails[block.value] != kNoKeyTail,
                   "the filling key group of {} rows in block {} has no key tail", tail_rows, block.value);
        context.key_tail = batch.key_tails[block.value];
        context.key_tail_first = seq.num_cached - tail_rows;
      }
      paged_attention(kv, layer, context, shape_, &q[t * q_width], &out[t * out_width], g_begin, g_end, scores, slice);
      item += parts > 1 ? 1 : g_end - g_begin;
    }
  });
}

}  // namespace kvs
