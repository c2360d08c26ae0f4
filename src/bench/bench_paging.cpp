#include "bench/bench_paging.h"

#include <fmt/format.h>

#include <algorithm>

#include "kv/kv_cache_manager.h"

namespace kvs {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Expected<std::unique_ptr<KvCacheManager>> toy_manager(size_t block_size, size_t num_blocks) {
  return KvCacheManager::create({.spec = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .block_size = block_size},
                                 .num_blocks = num_blocks});
}

double waste_percent(size_t allocated, size_t used) {
  return allocated == 0 ? 0.0 : 100.0 * static_cast<double>(allocated - used) / static_cast<double>(allocated);
}

// Grows all sequences to their full lengths; returns the blocks in use at the end.
Expected<size_t> grow_all(KvCacheManager& manager, std::span<const size_t> lengths) {
  const auto fail = [&](size_t seq, size_t n) {
    return Status::out_of_memory(
        fmt::format("paging simulation: sequence {} could not reserve {} tokens ({} of {} "
                    "blocks in use)",
                    seq, n, manager.pool().num_used_blocks(), manager.pool().num_blocks()));
  };
  std::vector<size_t> held(lengths.size());
  // The simulation has no text: every position holds token 0 (the ids only feed prefix hashing).
  const std::vector<TokenId> filler(lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end()), 0);
  const auto tokens = [&](size_t n) { return std::span(filler).first(n); };
  for (size_t i = 0; i < lengths.size(); ++i) {
    const size_t prompt = std::max<size_t>(1, lengths[i] / 2);
    if (!manager.reserve(SeqId{i}, prompt)) return fail(i, prompt);
    manager.commit(SeqId{i}, tokens(prompt));
    held[i] = prompt;
  }
  for (bool growing = true; growing;) {
    growing = false;
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (held[i] == lengths[i]) continue;
      if (!manager.reserve(SeqId{i}, 1)) return fail(i, 1);
      manager.commit(SeqId{i}, tokens(1));
      ++held[i];
      growing = true;
    }
  }
  KVS_RETURN_IF_ERROR(manager.check_invariants());
  return manager.pool().num_used_blocks();
}

// Sequences, in order, whose full length fits a pool of `num_blocks` before the first that does not.
Expected<size_t> admit_in_order(size_t block_size, size_t num_blocks, std::span<const size_t> lengths) {
  auto manager = toy_manager(block_size, num_blocks);
  if (!manager) return manager.status();
  size_t admitted = 0;
  const std::vector<TokenId> filler(lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end()), 0);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (!(*manager)->reserve(SeqId{i}, lengths[i])) break;
    (*manager)->commit(SeqId{i}, std::span(filler).first(lengths[i]));
    ++admitted;
  }
  KVS_RETURN_IF_ERROR((*manager)->check_invariants());
  return admitted;
}

}  // namespace

std::vector<size_t> paging_workload_lengths(const PagingWorkload& w) {
  uint64_t state = w.seed;
  const uint64_t span = w.max_tokens - w.min_tokens + 1;
  std::vector<size_t> lengths(w.num_sequences);
  for (size_t& n : lengths) n = w.min_tokens + static_cast<size_t>(splitmix64(state) % span);
  return lengths;
}

Expected<PagingMemoryResult> simulate_paging_memory(const PagingWorkload& w, std::span<const size_t> lengths,
                                                    const KvCacheSpec& model_spec) {
  KvCacheSpec spec = model_spec;
  spec.block_size = w.block_size;
  KVS_RETURN_IF_ERROR(spec.validate());
  for (size_t n : lengths) {
    if (n == 0 || n > w.max_tokens) {
      return Status::invalid_argument(
          fmt::format("paging workload length {} is outside [1, {}] (the slot size)", n, w.max_tokens));
    }
  }
  KvCacheSpec per_token = spec;
  per_token.block_size = 1;
  const size_t token_bytes = kv_bytes_per_block(per_token).total();
  const size_t block_bytes = kv_bytes_per_block(spec).total();

  PagingMemoryResult r{.num_sequences = lengths.size(), .block_size = w.block_size, .slot_tokens = w.max_tokens};
  for (size_t n : lengths) r.tokens_held += n;

  size_t blocks_needed = 0;
  for (size_t n : lengths) blocks_needed += kv_blocks_for_tokens(n, w.block_size);
  auto manager = toy_manager(w.block_size, std::max<size_t>(1, blocks_needed));
  if (!manager) return manager.status();
  auto used = grow_all(**manager, lengths);
  if (!used) return used.status();
  r.paged_blocks = *used;
  r.paged_bytes = r.paged_blocks * block_bytes;
  r.contiguous_bytes = r.num_sequences * w.max_tokens * token_bytes;
  r.token_bytes = r.tokens_held * token_bytes;
  r.paged_waste_percent = waste_percent(r.paged_bytes, r.token_bytes);
  r.contiguous_waste_percent = waste_percent(r.contiguous_bytes, r.token_bytes);

  r.budget_bytes = w.budget_slots * w.max_tokens * token_bytes;
  r.contiguous_fit = w.budget_slots;
  auto fit = admit_in_order(w.block_size, r.budget_bytes / block_bytes, lengths);
  if (!fit) return fit.status();
  r.paged_fit = *fit;
  r.fit_ratio = static_cast<double>(r.paged_fit) / static_cast<double>(r.contiguous_fit);
  return r;
}

}  // namespace kvs
