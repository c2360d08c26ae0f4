#include "bench/bench_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvs {
namespace {

// Lowers every value above `limit` to `limit`, keeping the order and dropping duplicates.
std::vector<size_t> clamp_all(const std::vector<size_t>& values, size_t limit, const char* what,
                              std::vector<std::string>& notes) {
  std::vector<size_t> out;
  for (size_t v : values) {
    const size_t fitted = std::min(v, limit);
    if (fitted != v) notes.push_back(fmt::format("{} {} lowered to {} to fit the context", what, v, fitted));
    if (std::find(out.begin(), out.end(), fitted) == out.end()) out.push_back(fitted);
  }
  return out;
}

}  // namespace

BenchPlan BenchPlan::standard() { return BenchPlan{}; }

BenchPlan BenchPlan::quick() {
  BenchPlan p;
  p.reps = 2;
  p.prefill_tokens = {16, 64};
  p.decode_depths = {0, 64, 256};
  p.decode_tokens = 16;
  p.cache_contexts = {16, 64};
  p.cached_steps = 4;
  p.probe_bytes = size_t{64} << 20;
  return p;
}

BenchPlan BenchPlan::weights_only() const {
  BenchPlan p = *this;
  if (!p.prefill_tokens.empty())
    p.prefill_tokens = {*std::max_element(p.prefill_tokens.begin(), p.prefill_tokens.end())};
  if (!p.decode_depths.empty()) p.decode_depths = {p.decode_depths.front()};
  p.cache_contexts.clear();
  return p;
}

Status BenchPlan::validate() const {
  if (reps == 0) return Status::invalid_argument("bench needs at least 1 repetition, got 0");
  if (prefill_tokens.empty() || decode_depths.empty()) {
    return Status::invalid_argument(fmt::format("bench needs prompt lengths ({}) and decode depths ({})",
                                                prefill_tokens.size(), decode_depths.size()));
  }
  for (size_t n : prefill_tokens) {
    if (n == 0) return Status::invalid_argument("a prefill prompt length is 0");
  }
  for (size_t n : cache_contexts) {
    if (n == 0) return Status::invalid_argument("a cache-vs-no-cache context length is 0");
  }
  if (decode_tokens == 0 || cached_steps == 0 || max_batch_tokens == 0) {
    return Status::invalid_argument(
        fmt::format("decode tokens ({}), cached steps ({}) and batch tokens ({}) must be "
                    "positive",
                    decode_tokens, cached_steps, max_batch_tokens));
  }
  const PagingWorkload& w = paging;
  if (w.num_sequences == 0 || w.min_tokens == 0 || w.min_tokens > w.max_tokens || w.budget_slots == 0) {
    return Status::invalid_argument(fmt::format(
        "paging workload needs sequences > 0 ({}), 0 < min tokens ({}) <= max tokens ({}) and budget slots > 0 ({})",
        w.num_sequences, w.min_tokens, w.max_tokens, w.budget_slots));
  }
  return Status::ok();
}

FittedPlan fit_plan_to_context(const BenchPlan& plan, size_t context_length) {
  FittedPlan fitted{.plan = plan, .notes = {}};
  BenchPlan& p = fitted.plan;
  auto& notes = fitted.notes;
  // The engine computes at most context - 1 positions of a sequence (the token after the last position can
  // never be computed), and a decode run from depth 0 starts after a 1-token prompt.
  if (p.decode_tokens + 2 > context_length) {
    p.decode_tokens = std::max<size_t>(1, context_length / 2);
    notes.push_back(fmt::format("decode tokens lowered to {} for a context of {}", p.decode_tokens, context_length));
  }
  p.prefill_tokens = clamp_all(p.prefill_tokens, context_length, "prompt length", notes);
  p.decode_depths = clamp_all(p.decode_depths, context_length - p.decode_tokens - 1, "decode depth", notes);
  // The cached steps run on from the context, one position each.
  p.cache_contexts = clamp_all(p.cache_contexts, context_length - std::min(context_length - 1, p.cached_steps + 1),
                               "cache-vs-no-cache context", notes);
  if (p.paging.max_tokens > context_length) {
    notes.push_back(
        fmt::format("paging workload max length {} lowered to the context {}", p.paging.max_tokens, context_length));
    p.paging.max_tokens = context_length;
    p.paging.min_tokens = std::min(p.paging.min_tokens, context_length);
  }
  return fitted;
}

}  // namespace kvs
