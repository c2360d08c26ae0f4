// What `kvserve bench` measures: the sizes of every section and how many repetitions each gets.
// The standard plan is the one the README table comes from; the quick plan is a smoke run that
// finishes in seconds on a tiny model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kvs {

struct PagingWorkload {
  size_t num_sequences = 64;
  size_t min_tokens = 32;    // sequence lengths (prompt + generated) spread over [min, max]
  size_t max_tokens = 2048;  // also what a slot-based engine preallocates per sequence
  size_t budget_slots = 16;  // the shared budget: this many contiguous max-length slots
  size_t block_size = 16;    // tokens per block of the paged layout
  uint64_t seed = 7;
};

struct BenchPlan {
  size_t reps = 3;                                           // repetitions of every timed measurement
  std::vector<size_t> prefill_tokens = {128, 512};           // prompt lengths
  std::vector<size_t> decode_depths = {0, 512, 2048};        // context already in the cache
  size_t decode_tokens = 128;                                // tokens decoded per repetition
  std::vector<size_t> cache_contexts = {16, 64, 256, 1024};  // cache vs no-cache per token (none: not measured)
  size_t cached_steps = 32;                                  // decode steps averaged per cached measurement
  size_t max_batch_tokens = 512;                             // prefill chunk
  size_t probe_bytes = size_t{1} << 30;                      // bandwidth probe buffer
  size_t paging_block_size = 16;                             // block size of the paged runner
  PagingWorkload paging;
  uint64_t seed = 1234;  // token ids of prompts

  static BenchPlan standard();
  static BenchPlan quick();  // tiny sizes for a smoke run
  // What a weight type or kernel level changes, and no more: the longest prompt, the first decode depth, no
  // cache-vs-recompute curve (bench/weight_types.sh runs one of these per type and ISA).
  BenchPlan weights_only() const;

  Status validate() const;
};

// The plan clamped to a model's context length: every depth + decode_tokens, prompt and context
// must fit. Lengths that do not are lowered to the largest that fits (duplicates dropped); each
// change is described in `notes`.
struct FittedPlan {
  BenchPlan plan;
  std::vector<std::string> notes;
};
FittedPlan fit_plan_to_context(const BenchPlan& plan, size_t context_length);

}  // namespace kvs
