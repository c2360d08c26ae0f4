#include "kv/attention_types/sliding_window.h"

#include <algorithm>
#include <vector>

#include "kv/kv_layer_groups.h"

namespace kvs {

size_t SlidingWindow::blocks_skipped(size_t position, size_t sequence_window, size_t block_size) const {
  return blocks_before_window(position, narrower_window(window_, sequence_window), block_size);
}

PrefixMatch SlidingWindow::longest_cached_prefix(const PrefixLookup& l) const {
  const size_t bs = l.block_size, full = l.limit / bs;
  // Every whole block's chained hash, and the cached block holding it (by hash and its own tokens).
  std::vector<BlockHash> hashes(full);
  std::vector<BlockId> found(full, kNullBlock);
  std::vector<size_t> run(full + 1, 0);  // run[k]: found blocks ending at block k - 1, back to back
  BlockHash hash = l.root;
  for (size_t i = 0; i < full; ++i) {
    hash = l.hash(hash, i * bs, bs);
    hashes[i] = hash;
    found[i] = l.index->find_full_by_hash(hash, l.tokens.subspan(i * bs, bs)).value_or(kNullBlock);
    run[i + 1] = found[i] == kNullBlock ? 0 : run[i] + 1;
  }
  // The most whole blocks k whose window (blocks [blocks_skipped(k bs), k)) is all cached.
  const auto skipped = [&](size_t k) { return std::min(k, blocks_before_window(k * bs, window_, bs)); };
  size_t k = full;
  while (k > 0 && run[k] < k - skipped(k)) --k;
  PrefixMatch m;
  const size_t first_needed = skipped(k);
  for (size_t i = 0; i < k; ++i) {
    m.blocks.push_back(i < first_needed ? kNullBlock : found[i]);
    m.hashes.push_back(hashes[i]);
  }
  // A partial block after them, under the last whole one (which is then cached), or the root.
  if (k == 0 || m.blocks.back() != kNullBlock)
    l.add_partial_match(m, k == 0 ? ContentRef::root(l.name_space) : l.content_of(m.blocks.back()));
  return m;
}

}  // namespace kvs
