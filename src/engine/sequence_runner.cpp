#include "engine/sequence_runner.h"

#include <algorithm>
#include <numeric>

namespace kvs {
namespace {
constexpr SeqId kSequence{0};
}

SequenceRunner::SequenceRunner(const LlamaModel& model, ThreadPool& pool, size_t capacity, size_t max_batch_tokens,
                               SequenceKvOptions kv)
    : model_(model),
      forward_(model, pool),
      capacity_(std::max<size_t>(1, capacity)),
      max_batch_tokens_(std::max<size_t>(1, max_batch_tokens)) {
  const ModelConfig& c = model.config();
  if (kv.block_size == 0) {
    contiguous_ = std::make_unique<KvStorage>(KvShape{.num_layers = c.num_layers,
                                                      .num_kv_heads = c.num_kv_heads,
                                                      .head_dim = c.head_dim,
                                                      .block_size = capacity_,
                                                      .num_blocks = 1,
                                                      .dtype = kv.dtype});
    return;
  }
  const KvCacheSpec spec{.num_layers = c.num_layers,
                         .num_kv_heads = c.num_kv_heads,
                         .head_dim = c.head_dim,
                         .dtype = kv.dtype,
                         .block_size = kv.block_size};
  const size_t blocks = kv.num_blocks ? kv.num_blocks : kv_blocks_for_tokens(capacity_, kv.block_size);
  auto manager = KvCacheManager::create({.spec = spec, .num_blocks = blocks});
  KVS_ASSERT(manager.has_value(), "KV cache options were not validated: {}", manager.status().message());
  manager_ = std::move(manager).value();
  paged_ = std::make_unique<KvStorage>(manager_->storage_shape());
}

size_t SequenceRunner::kv_bytes() const { return manager_ ? paged_->bytes() : contiguous_->bytes(); }

KvUsage SequenceRunner::kv_usage() const {
  if (manager_) return manager_->usage();
  return KvUsage{.blocks_total = 1,
                 .blocks_used = length_ > 0,
                 .bytes_total = contiguous_->bytes(),
                 .bytes_used = length_ > 0 ? contiguous_->bytes() : 0};
}

void SequenceRunner::truncate(size_t length) {
  if (length >= length_) return;
  length_ = length;
  if (!manager_) return;
  // Rebuild the table at the new length: whole blocks past it go back to the pool.
  const std::vector<TokenId> kept(manager_->tokens(kSequence).begin(),
                                  manager_->tokens(kSequence).begin() + static_cast<long>(length));
  manager_->free(kSequence);
  if (length > 0) {
    const bool ok = manager_->reserve(kSequence, length);
    KVS_ASSERT(ok, "re-reserving {} tokens after a truncate failed", length);
    manager_->commit(kSequence, kept);
  }
}

Expected<std::span<const float>> SequenceRunner::append(std::span<const TokenId> tokens, bool all_logits) {
  const size_t vocab = model_.config().vocab_size;
  if (length_ + tokens.size() > capacity_) {
    return Status::out_of_range(fmt::format("the sequence would hold {} + {} tokens, beyond its capacity of {}",
                                            length_, tokens.size(), capacity_));
  }
  if (manager_ && !manager_->reserve(kSequence, tokens.size())) {
    const KvUsage u = manager_->usage();
    return Status::out_of_memory(fmt::format(
        "KV cache exhausted: {} more tokens need {} more blocks of {} tokens, but only {} of {} blocks are free "
        "({} bytes in the pool)",
        tokens.size(),
        kv_blocks_for_tokens(length_ + tokens.size(), manager_->block_size()) -
            (manager_->contains(kSequence) ? manager_->block_table(kSequence).size() : 0),
        manager_->block_size(), u.blocks_total - u.blocks_used, u.blocks_total, u.bytes_total));
  }
  logits_.resize((all_logits ? tokens.size() : 1) * vocab);
  const BlockId contiguous_table[] = {BlockId{0}};
  std::vector<uint32_t> positions, seq_of_token, logits_for;
  std::vector<KvSlot> slots;
  for (size_t done = 0; done < tokens.size();) {
    const size_t n = std::min(max_batch_tokens_, tokens.size() - done);
    positions.resize(n);
    std::iota(positions.begin(), positions.end(), static_cast<uint32_t>(length_));
    seq_of_token.assign(n, 0);
    slots.resize(n);
    for (size_t i = 0; i < n; ++i) {
      slots[i] = manager_ ? manager_->slot_of(kSequence, length_ + i) : KvSlot{length_ + i};
    }
    float* out = logits_.data();
    logits_for.clear();
    if (all_logits) {
      for (uint32_t i = 0; i < n; ++i) logits_for.push_back(i);
      out += done * vocab;
    } else if (done + n == tokens.size()) {
      logits_for.push_back(static_cast<uint32_t>(n - 1));
    }
    std::vector<uint32_t> visible(n);
    std::iota(visible.begin(), visible.end(), static_cast<uint32_t>(length_ + 1));  // causal: slots [0, p]
    const SequenceAttention sequence{
        .blocks = manager_ ? manager_->block_table(kSequence) : std::span<const BlockId>(contiguous_table),
        .num_cached = static_cast<uint32_t>(length_ + n)};
    const ForwardBatch batch{
        .tokens = tokens.subspan(done, n),
        .positions = positions,
        .kv_slots = slots,
        .attention = {.sequences = {&sequence, 1}, .sequence_of_token = seq_of_token, .visible_slots = visible},
        .logits_for = logits_for};
    forward_.forward(batch, manager_ ? *paged_ : *contiguous_, {out, logits_for.size() * vocab});
    if (manager_) manager_->commit(kSequence, tokens.subspan(done, n));
    length_ += n;
    done += n;
  }
  return std::span<const float>(logits_);
}

}  // namespace kvs
