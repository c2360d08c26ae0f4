// How a preempted request's KV is kept (scheduler.h preempts when the pool cannot hold a step):
//   recompute  its blocks go back to the pool like a finished request's: what the prefix cache still holds
//              when it resumes (in the pool, or demoted to a tier) is reused, the rest is computed again;
//   swap       its blocks, the partial last one included, are copied into the host tier at once and pinned
//              there until it resumes (or ends): it resumes by copying them back, computing nothing again;
//   auto       per victim, whichever costs less: copying its bytes out and back at the measured copy
//              bandwidth, or recomputing its tokens at the measured prefill rate (swap without a host tier,
//              or when the host tier cannot pin its blocks, is recompute).
#pragma once

#include <optional>
#include <string_view>

namespace kvs {

enum class KvPreemptMode { kAuto, kSwap, kRecompute };
std::string_view kv_preempt_mode_name(KvPreemptMode mode);
std::optional<KvPreemptMode> kv_preempt_mode_from_name(std::string_view name);

// An exponentially weighted average of amount / seconds over observations (a rate that drifts).
class RateEstimate {
 public:
  void observe(double amount, double seconds);
  bool known() const { return rate_ > 0.0; }
  double per_second() const { return rate_; }

 private:
  static constexpr double kWeight = 0.2;  // of the newest observation
  double rate_ = 0.0;
};

// What the engine has measured, for the choice under KvPreemptMode::kAuto.
struct PreemptionCosts {
  RateEstimate copy_bytes;        // bytes moved between the pool and the host tier per second
  RateEstimate recompute_tokens;  // tokens a prefill step computes per second
  // Seconds to copy `bytes` out and back in; to compute `tokens` again. Unknown rates: nullopt.
  std::optional<double> swap_seconds(size_t bytes) const;
  std::optional<double> recompute_seconds(size_t tokens) const;
};

// Whether a victim holding `bytes` of KV for `tokens` computed tokens is swapped (when the host tier can
// take it). kAuto with a rate not yet measured swaps: copying memory is the cheaper move on every host this
// engine has run on (docs/KV_TIERS.md), and the first transfers and steps measure it.
bool prefer_swap(KvPreemptMode mode, const PreemptionCosts& costs, size_t bytes, size_t tokens);

}  // namespace kvs
