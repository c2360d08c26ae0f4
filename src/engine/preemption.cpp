#include "engine/preemption.h"

namespace kvs {

std::string_view kv_preempt_mode_name(KvPreemptMode mode) {
  return mode == KvPreemptMode::kSwap ? "swap" : mode == KvPreemptMode::kRecompute ? "recompute" : "auto";
}

std::optional<KvPreemptMode> kv_preempt_mode_from_name(std::string_view name) {
  for (KvPreemptMode m : {KvPreemptMode::kAuto, KvPreemptMode::kSwap, KvPreemptMode::kRecompute})
    if (kv_preempt_mode_name(m) == name) return m;
  return std::nullopt;
}

void RateEstimate::observe(double amount, double seconds) {
  if (amount <= 0.0 || seconds <= 0.0) return;
  const double rate = amount / seconds;
  rate_ = known() ? (1.0 - kWeight) * rate_ + kWeight * rate : rate;
}

std::optional<double> PreemptionCosts::swap_seconds(size_t bytes) const {
  if (!copy_bytes.known()) return std::nullopt;
  return 2.0 * static_cast<double>(bytes) / copy_bytes.per_second();
}

std::optional<double> PreemptionCosts::recompute_seconds(size_t tokens) const {
  if (!recompute_tokens.known()) return std::nullopt;
  return static_cast<double>(tokens) / recompute_tokens.per_second();
}

bool prefer_swap(KvPreemptMode mode, const PreemptionCosts& costs, size_t bytes, size_t tokens) {
  if (mode != KvPreemptMode::kAuto) return mode == KvPreemptMode::kSwap;
  if (tokens == 0) return false;  // nothing computed: nothing to keep
  const std::optional<double> swap = costs.swap_seconds(bytes), recompute = costs.recompute_seconds(tokens);
  return !swap || !recompute || *swap < *recompute;
}

}  // namespace kvs
