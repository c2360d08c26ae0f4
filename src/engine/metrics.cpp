#include "engine/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvs {

Histogram Histogram::with_bounds(std::vector<double> upper_bounds) {
  Histogram h;
  h.bounds = std::move(upper_bounds);
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++counts[bucket];
  sum += value;
  ++count;
}

double Histogram::quantile(double q) const {
  if (count == 0) return 0.0;
  const double target = q * static_cast<double>(count);
  uint64_t seen = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    seen += counts[i];
    if (static_cast<double>(seen) >= target) return i < bounds.size() ? bounds[i] : bounds.back();
  }
  return bounds.back();
}

MetricsRecorder::MetricsRecorder() {
  const std::vector<double> latency = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25,
                                       0.5,   0.75,   1.0,   2.5,  5.0,   7.5,  10.0,  30.0, 60.0};
  totals_.time_to_first_token_seconds = Histogram::with_bounds(latency);
  totals_.inter_token_latency_seconds = Histogram::with_bounds(latency);
  totals_.step_tokens = Histogram::with_bounds({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048});
}

namespace {

void gauge(std::string& out, const char* name, const char* help, double value) {
  out += fmt::format("# HELP kvserve_{0} {1}\n# TYPE kvserve_{0} gauge\nkvserve_{0} {2}\n", name, help, value);
}

template <typename Number>  // uint64_t, or double for seconds
void counter(std::string& out, const char* name, const char* help, Number value) {
  out += fmt::format("# HELP kvserve_{0} {1}\n# TYPE kvserve_{0} counter\nkvserve_{0} {2}\n", name, help, value);
}

void histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  out += fmt::format("# HELP kvserve_{0} {1}\n# TYPE kvserve_{0} histogram\n", name, help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    out += fmt::format("kvserve_{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds[i], cumulative);
  }
  out += fmt::format("kvserve_{0}_bucket{{le=\"+Inf\"}} {1}\nkvserve_{0}_sum {2}\nkvserve_{0}_count {1}\n", name,
                     h.count, h.sum);
}

// One family per figure, a sample per tier (label tier="host" or "disk").
void kv_tier_metrics(std::string& out, const std::vector<KvTierMetrics>& tiers) {
  if (tiers.empty()) return;
  const auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP kvserve_{0} {1}\n# TYPE kvserve_{0} {2}\n", name, help, type);
    for (const KvTierMetrics& t : tiers) out += fmt::format("kvserve_{}{{tier=\"{}\"}} {}\n", name, t.tier, value(t));
  };
  family("kv_tier_capacity_bytes", "gauge", "Byte budget of a KV offload tier.",
         [](const KvTierMetrics& t) { return t.capacity_bytes; });
  family("kv_tier_bytes", "gauge", "Bytes of KV blocks a KV offload tier holds.",
         [](const KvTierMetrics& t) { return t.bytes_held; });
  family("kv_tier_blocks", "gauge", "KV blocks a KV offload tier holds.",
         [](const KvTierMetrics& t) { return t.blocks_held; });
  family("kv_tier_hits_total", "counter", "KV blocks loaded out of a tier.",
         [](const KvTierMetrics& t) { return t.hits; });
  family("kv_tier_bytes_in_total", "counter", "Bytes written into a KV offload tier.",
         [](const KvTierMetrics& t) { return t.bytes_stored; });
  family("kv_tier_bytes_out_total", "counter", "Bytes read out of a KV offload tier.",
         [](const KvTierMetrics& t) { return t.bytes_loaded; });
  family("kv_tier_blocks_in_total", "counter", "KV blocks written into a KV offload tier.",
         [](const KvTierMetrics& t) { return t.stores; });
  family("kv_tier_blocks_out_total", "counter", "KV blocks read out of a KV offload tier.",
         [](const KvTierMetrics& t) { return t.loads; });
  family("kv_tier_rejected_total", "counter", "KV blocks a tier could not keep (no room, I/O error, full disk).",
         [](const KvTierMetrics& t) { return t.rejected; });
  family("kv_tier_load_failures_total", "counter",
         "Reads from a tier that failed (I/O error, short read, bad checksum); their tokens are recomputed.",
         [](const KvTierMetrics& t) { return t.load_failures; });
  family("kv_tier_evictions_total", "counter", "KV blocks a tier dropped to make room.",
         [](const KvTierMetrics& t) { return t.evictions; });
  out +=
      "# HELP kvserve_kv_tier_load_seconds Time spent reading KV blocks out of a tier.\n"
      "# TYPE kvserve_kv_tier_load_seconds summary\n";
  for (const KvTierMetrics& t : tiers) {
    out += fmt::format(
        "kvserve_kv_tier_load_seconds_sum{{tier=\"{0}\"}} {1}\nkvserve_kv_tier_load_seconds_count{{tier=\"{0}\"}} "
        "{2}\n",
        t.tier, t.load_seconds_sum, t.hits + t.load_failures);
  }
}

}  // namespace

std::string to_prometheus(const EngineMetrics& m) {
  std::string out;
  gauge(out, "requests_running", "Requests with KV blocks in the running batch.",
        static_cast<double>(m.requests_running));
  gauge(out, "requests_waiting", "Requests queued for admission (including preempted ones).",
        static_cast<double>(m.requests_waiting));
  gauge(out, "kv_blocks_total", "KV cache blocks in the pool.", static_cast<double>(m.kv_blocks_total));
  gauge(out, "kv_blocks_used", "KV cache blocks held by requests.", static_cast<double>(m.kv_blocks_used));
  gauge(out, "kv_blocks_used_peak", "The most KV cache blocks held at once since the start.",
        static_cast<double>(m.kv_blocks_used_peak));
  counter(out, "kv_evicted_tokens_total", "Tokens KV eviction policies removed from sequences' caches.",
          m.kv_evicted_tokens_total);
  counter(out, "kv_evictions_total", "Evictions of KV eviction policies (each compacts one sequence's cache).",
          m.kv_evictions_total);
  counter(out, "kv_copy_on_write_total", "Shared partial KV blocks of parallel samples copied when first written.",
          m.kv_copy_on_write_total);
  gauge(out, "kv_usage_ratio", "Fraction of KV blocks in use.", m.kv_usage_ratio);
  gauge(out, "kv_blocks_cached_idle", "Free KV blocks that still hold cached prefixes (reused on a hit).",
        static_cast<double>(m.kv_blocks_cached_idle));
  counter(out, "prefix_cache_queries_tokens_total", "Tokens of sequences looked up in the prefix cache.",
          m.prefix_cache_queries_tokens_total);
  counter(out, "prefix_cache_hits_tokens_total", "Looked-up tokens whose K/V came from the prefix cache.",
          m.prefix_cache_hits_tokens_total);
  counter(out, "prefix_cache_copied_tokens_total",
          "Of the hits, tokens copied from a partial block match (prefixes not ending on a block boundary).",
          m.prefix_cache_copied_tokens_total);
  gauge(out, "prefix_cache_hit_ratio", "Prefix cache hits over queries, in tokens, since the start.",
        m.prefix_cache_queries_tokens_total == 0 ? 0.0
                                                 : static_cast<double>(m.prefix_cache_hits_tokens_total) /
                                                       static_cast<double>(m.prefix_cache_queries_tokens_total));
  counter(out, "prefix_cache_evictions_total", "Cached KV blocks evicted for new content.",
          m.prefix_cache_evictions_total);
  counter(out, "prefix_cache_tier_hits_tokens_total", "Of the hits, tokens loaded from a KV offload tier.",
          m.prefix_cache_tier_hits_tokens_total);
  counter(out, "kv_demoted_blocks_total", "Cached KV blocks the pool evicted into its offload tiers.",
          m.kv_demoted_blocks_total);
  kv_tier_metrics(out, m.kv_tiers);
  counter(out, "kv_load_waits_total", "Requests that waited for their prefix to come up from the disk tier.",
          m.kv_load_waits_total);
  counter(out, "kv_load_timeouts_total",
          "Waits for a prefix cut short by the load timeout (the rest of the prefix was computed).",
          m.kv_load_timeouts_total);
  counter(out, "kv_load_skipped_total",
          "Requests that computed a prefix the disk tier held: the measured rates made computing it cheaper.",
          m.kv_load_skipped_total);
  counter(out, "kv_transfers_retried_total",
          "KV block moves the device did not take (a refused submission), moved by the host instead.",
          m.kv_transfers_retried_total);
  counter(out, "kv_transfers_lost_total",
          "KV moves that failed after the device took them (a lost device): the pool's and the host tier's cached "
          "blocks were dropped and every request computed its K/V again.",
          m.kv_transfers_lost_total);
  counter(out, "kv_load_stall_seconds_total",
          "Time the engine had nothing to compute but reads from the disk tier to wait for (the reads' time not "
          "hidden behind other requests' compute).",
          m.kv_load_stall_seconds_sum);
  counter(out, "kv_load_wait_seconds_total", "Time requests waited for their prefix to come up from the disk tier.",
          m.kv_load_wait_seconds_sum);
  counter(out, "prompt_tokens_total", "Prompt tokens of accepted requests.", m.prompt_tokens_total);
  counter(out, "generation_tokens_total", "Generated tokens.", m.generation_tokens_total);
  counter(out, "preemptions_total", "Requests preempted for lack of KV blocks.", m.preemptions_total);
  counter(out, "preemptions_swapped_total",
          "Of the preemptions, those whose KV was swapped to the host tier (the others are recomputed).",
          m.preemptions_swapped_total);
  counter(out, "preempted_tokens_recomputed_total",
          "Tokens preempted requests had computed and computed again when they resumed.",
          m.preempted_tokens_recomputed_total);
  gauge(out, "kv_copy_bytes_per_second",
        "Measured copy bandwidth between the KV pool and the host tier (what a swap costs; 0: none yet).",
        m.kv_copy_bytes_per_second);
  gauge(out, "recompute_tokens_per_second", "Measured prefill rate (what recomputing costs; 0: none yet).",
        m.recompute_tokens_per_second);
  counter(out, "requests_finished_total", "Requests that finished (stop, length, EOS).", m.requests_finished_total);
  counter(out, "requests_aborted_total", "Requests cancelled by their client.", m.requests_aborted_total);
  histogram(out, "time_to_first_token_seconds", "Time from arrival to the first generated token.",
            m.time_to_first_token_seconds);
  histogram(out, "inter_token_latency_seconds", "Time between consecutive generated tokens of a request.",
            m.inter_token_latency_seconds);
  histogram(out, "step_tokens", "Tokens per forward pass.", m.step_tokens);
  return out;
}

}  // namespace kvs
