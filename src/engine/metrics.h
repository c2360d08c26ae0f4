// Counters, gauges and latency histograms of the engine, exported by the server as Prometheus
// text. The recorder lives in the engine (single thread); snapshots are plain copies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kv/tiers/kv_tier.h"

namespace kvs {

// Cumulative histogram with fixed bucket bounds (seconds), Prometheus style.
struct Histogram {
  std::vector<double> bounds;    // upper bounds, ascending; +Inf implied
  std::vector<uint64_t> counts;  // per bucket (not cumulative), size bounds.size() + 1
  double sum = 0.0;
  uint64_t count = 0;

  static Histogram with_bounds(std::vector<double> upper_bounds);
  void observe(double value);
  double quantile(double q) const;  // estimate from buckets (upper bound of the bucket reaching q)
};

// One KV offload tier below the pool (kv/tiers/kv_tier_stack.h): what it holds and what moved through it.
// One offload tier's figures (kv/tiers/kv_tier.h's TierStats) under its name.
struct KvTierMetrics : TierStats {
  std::string tier;  // "host", "disk"
};

struct EngineMetrics {
  size_t requests_running = 0;
  size_t requests_waiting = 0;
  size_t kv_blocks_total = 0;
  size_t kv_blocks_used = 0;
  size_t kv_blocks_used_peak = 0;        // high-water mark since the start
  uint64_t kv_copy_on_write_total = 0;   // forked partial blocks copied when first written (parallel sampling)
  uint64_t kv_evicted_tokens_total = 0;  // tokens eviction policies removed from caches
  uint64_t kv_evictions_total = 0;       // evictions (each frees evict_unit slots of one sequence)
  double kv_usage_ratio = 0.0;
  size_t kv_blocks_cached_idle = 0;                  // free blocks still holding cached prefixes
  uint64_t prefix_cache_queries_tokens_total = 0;    // prompt tokens looked up in the prefix cache
  uint64_t prefix_cache_hits_tokens_total = 0;       // of those, tokens whose K/V came from it
  uint64_t prefix_cache_copied_tokens_total = 0;     // of the hits, slots copied from partial matches
  uint64_t prefix_cache_evictions_total = 0;         // cached blocks taken for new content
  uint64_t prefix_cache_tier_hits_tokens_total = 0;  // of the hits, tokens loaded from an offload tier
  uint64_t kv_demoted_blocks_total = 0;              // cached blocks the pool evicted into its offload tiers
  uint64_t kv_load_waits_total = 0;         // requests that waited for their prefix to come up from the disk tier
  uint64_t kv_load_timeouts_total = 0;      // of those, the waits cut short by --kv-load-timeout-ms
  uint64_t kv_load_skipped_total = 0;       // requests that computed their prefix: the measured rates made that cheaper
  double kv_load_wait_seconds_sum = 0;      // time the waits took (each request's: waits overlap)
  double kv_load_stall_seconds_sum = 0;     // time the engine had nothing to compute but disk reads to wait for
  uint64_t kv_transfers_retried_total = 0;  // KV moves a device did not take (a refused submission) moved by the host
  uint64_t kv_transfers_lost_total = 0;  // KV op logs that failed midway (a device lost a move): the cache recomputed
  std::vector<KvTierMetrics> kv_tiers;   // host, then disk (empty without tiers)
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t preemptions_total = 0;
  uint64_t preemptions_swapped_total = 0;          // of those, swapped to the host tier (the rest recomputed)
  uint64_t preempted_tokens_recomputed_total = 0;  // tokens resumed requests computed again
  double kv_copy_bytes_per_second = 0.0;           // measured pool <-> host tier copies (0: none yet)
  double recompute_tokens_per_second = 0.0;        // measured prefill rate (0: no prefill step yet)
  uint64_t requests_finished_total = 0;
  uint64_t requests_aborted_total = 0;
  Histogram time_to_first_token_seconds;
  Histogram inter_token_latency_seconds;
  Histogram step_tokens;  // tokens per forward pass (batch size)
};

class MetricsRecorder {
 public:
  MetricsRecorder();
  EngineMetrics& totals() { return totals_; }
  const EngineMetrics& totals() const { return totals_; }

 private:
  EngineMetrics totals_;
};

// Prometheus text exposition format (version 0.0.4) of a snapshot, metric names prefixed kvserve_.
std::string to_prometheus(const EngineMetrics& m);

}  // namespace kvs
