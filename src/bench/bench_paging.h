// The memory half of the paging benchmark: a fixed-seed mixed-length workload run through a real
// KvCacheManager (reserve/commit as each sequence grows), compared with what a slot-based engine
// preallocates (every sequence gets a contiguous slot of the maximum length).
//
// The manager is built with toy K/V shapes (one layer, one head, head_dim 1) so the simulation
// allocates almost nothing; block counts do not depend on the shape, and bytes are reported for
// the real model's shape (`model_spec`).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "bench/bench_plan.h"
#include "core/status.h"
#include "kv/kv_sizing.h"

namespace kvs {

// Sequence lengths (prompt + generated), uniform over [min_tokens, max_tokens] from `seed`; the
// same on every platform.
std::vector<size_t> paging_workload_lengths(const PagingWorkload& workload);

struct PagingMemoryResult {
  size_t num_sequences = 0;
  size_t block_size = 0;
  size_t slot_tokens = 0;            // contiguous slot = the workload's maximum length
  size_t tokens_held = 0;            // sum of the sequence lengths
  size_t paged_blocks = 0;           // blocks in use once every sequence has its full length
  size_t paged_bytes = 0;            // paged_blocks x bytes per block
  size_t contiguous_bytes = 0;       // num_sequences x slot bytes
  size_t token_bytes = 0;            // bytes that hold tokens: tokens_held x bytes per token
  double paged_waste_percent = 0.0;  // (allocated - holding tokens) / allocated x 100
  double contiguous_waste_percent = 0.0;
  size_t budget_bytes = 0;    // budget_slots contiguous slots
  size_t contiguous_fit = 0;  // sequences the budget holds as slots (= budget_slots)
  size_t paged_fit = 0;       // workload sequences, in order, whose full length fits in the same budget
  double fit_ratio = 0.0;     // paged_fit / contiguous_fit
};

// Grows every sequence as an engine would: the first half of each length as one prompt reserve,
// then one token at a time round-robin across sequences, committing each. Then, separately, admits
// sequences in workload order into a pool the size of the budget until one no longer fits.
Expected<PagingMemoryResult> simulate_paging_memory(const PagingWorkload& workload, std::span<const size_t> lengths,
                                                    const KvCacheSpec& model_spec);

}  // namespace kvs
