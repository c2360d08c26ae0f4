// The write path of the KV cache: new K and V (fp32, from the projections) stored into their slots
// of a layer, in the element type of each (f16 and bf16 round to nearest even).
//
// Writes are block-aware: one call stores a run of consecutive slots of one block, the unit over
// which a block's scales are computed (quantized formats), so a block is written by one call at a
// time. Thread contract: calls for distinct blocks may run at once on different threads; calls for
// the same block must not overlap, and kv_write_runs() cuts a batch so that each block is in one run.
#pragma once

#include <span>
#include <vector>

#include "kv/kv_storage.h"
#include "tensor/isa.h"

namespace kvs {

// Tokens [first, first + count) of a batch, stored in consecutive slots of one block.
struct KvWriteRun {
  size_t first = 0;
  size_t count = 0;
};

// The runs of a batch whose token t goes to slots[t]: maximal spans of consecutive slots in one
// block. Asserts that no block appears in two runs (two sequences never write one block).
std::vector<KvWriteRun> kv_write_runs(std::span<const KvSlot> slots, size_t block_size);

// Stores x (already in stored form: H x for rotated keys) as row `row` of a head-block of format `f`
// whose scales are not per channel: floats as they are, quantized rows with their per-token scales.
void store_row(const KvTensorFormat& f, std::byte* head_block, size_t row, const float* x, Isa isa = best_isa());

// Stores `count` tokens at slots first_slot, first_slot + 1, ..., all in one block of `layer`.
// k: [count][num_kv_heads][head_dim], v: [count][num_kv_heads][value_width] fp32; an MLA latent: k
// [count][kv_lora_rank + rope_dim], v empty. Keys quantized per
// channel wait in the block's key tail `key_tail` until their group is complete (kv/key_tail_table.h);
// a run that starts or ends inside a group must have one.
void write_kv_run(KvStorage& kv, size_t layer, KvSlot first_slot, size_t count, std::span<const float> k,
                  std::span<const float> v, uint32_t key_tail = kNoKeyTail, Isa isa = best_isa());

}  // namespace kvs
