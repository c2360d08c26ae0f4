// The engine's prefix loads (engine.h): the prefixes of waiting requests brought up the offload tiers, and whether a
// request waits for its prefix or computes it.
#include "engine/engine.h"

namespace kvs {

bool Engine::prefetch_waiting() {
  // The host tier's slots take the disk's reads: the device's moves of them are done first.
  if (const Status moved = executor_->wait_for_transfers(); !moved) {
    lose_kv(moved);
    return false;
  }
  tiers_->poll();
  const SteadyTime now = clock_.now();
  // The disk is stuck while reads are on the way and none has finished for the timeout (how long other requests'
  // steps took in between does not matter: the reads go on meanwhile).
  const TierStats disk = tiers_->disk() != nullptr ? tiers_->disk()->stats() : TierStats{};
  if (disk.loads + disk.load_failures != disk_reads_done_ || tiers_->num_prefetching() == 0) {
    disk_reads_done_ = disk.loads + disk.load_failures;
    disk_progress_at_ = now;
  }
  const bool disk_stuck = now - disk_progress_at_ >= config_.kv_load_timeout;
  EngineMetrics& totals = recorder_.totals();
  const auto stop_waiting = [&](SequenceState& seq) {
    if (seq.kv_load_since == SteadyTime{}) return;
    totals.kv_load_wait_seconds_sum += std::chrono::duration<double>(now - seq.kv_load_since).count();
    seq.kv_load_since = {};
  };
  size_t looked = 0;
  for (SequenceState* seq : scheduler_.waiting()) {
    if (looked++ == config_.max_seqs) break;
    seq->kv_loading = false;
    if (!seq->use_prefix_cache || seq->kv_load_over) continue;
    const KvCacheManager::PrefixLoad load = kv_->group(0).load_prefix(seq->tokens, seq->prefix_namespace);
    if (load.reading == 0) {  // all of it the tiers hold is in the pool, or on its way there with this step
      stop_waiting(*seq);
      continue;
    }
    if (seq->kv_load_since == SteadyTime{}) {
      if (!load_beats_recompute(load.on_disk)) {
        seq->kv_load_over = true;
        ++totals.kv_load_skipped_total;
        continue;
      }
      seq->kv_load_since = now;
      const std::optional<std::chrono::nanoseconds> computing = recompute_time(load.on_disk);
      seq->kv_load_deadline = computing ? now + config_.kv_load_timeout + *computing : SteadyTime::max();
      ++totals.kv_load_waits_total;
    }
    if (disk_stuck || now >= seq->kv_load_deadline) {
      stop_waiting(*seq);
      seq->kv_load_over = true;
      ++totals.kv_load_timeouts_total;
      continue;
    }
    seq->kv_loading = true;
  }
  return true;
}

std::optional<std::chrono::nanoseconds> Engine::recompute_time(size_t blocks) const {
  const RateEstimate& prefill = scheduler_.preemption_costs().recompute_tokens;
  if (!prefill.known()) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(static_cast<double>(blocks * kv_->block_size()) / prefill.per_second()));
}

bool Engine::load_beats_recompute(size_t disk_blocks) const {
  const TierStats disk = tiers_->disk()->stats();
  const std::optional<std::chrono::nanoseconds> computing = recompute_time(disk_blocks);
  // Unmeasured, reading wins: a block file is read in a fraction of the time its tokens take to compute on every
  // host this engine has run on (docs/KV_TIERS.md), and the first reads measure it.
  if (disk.load_seconds_sum <= 0.0 || !computing) return true;
  const double bytes_per_second = static_cast<double>(disk.bytes_loaded) / disk.load_seconds_sum;
  const double read_seconds = static_cast<double>(disk_blocks * tiers_->format().block_bytes) / bytes_per_second;
  return read_seconds < std::chrono::duration<double>(*computing).count();
}

}  // namespace kvs
