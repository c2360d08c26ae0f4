#include "engine/sequence_runner.h"

#include <algorithm>
#include <numeric>

namespace kvs {

SequenceRunner::SequenceRunner(const LlamaModel& model, ThreadPool& pool, size_t capacity, size_t max_batch_tokens)
    : model_(model),
      forward_(model, pool),
      kv_(KvShape{.num_layers = model.config().num_layers,
                  .num_kv_heads = model.config().num_kv_heads,
                  .head_dim = model.config().head_dim,
                  .block_size = std::max<size_t>(1, capacity),
                  .num_blocks = 1}),
      max_batch_tokens_(std::max<size_t>(1, max_batch_tokens)) {}

std::span<const float> SequenceRunner::append(std::span<const TokenId> tokens, bool all_logits) {
  const size_t vocab = model_.config().vocab_size;
  KVS_ASSERT(length_ + tokens.size() <= capacity(), "sequence of {} + {} tokens exceeds capacity {}", length_,
             tokens.size(), capacity());
  logits_.resize((all_logits ? tokens.size() : 1) * vocab);
  const BlockId table[] = {BlockId{0}};
  const SequenceKvView sequence{.block_table = table};
  std::vector<uint32_t> positions, seq_of_token, logits_for;
  std::vector<KvSlot> slots;
  for (size_t done = 0; done < tokens.size();) {
    const size_t n = std::min(max_batch_tokens_, tokens.size() - done);
    positions.resize(n);
    std::iota(positions.begin(), positions.end(), static_cast<uint32_t>(length_));
    seq_of_token.assign(n, 0);
    slots.resize(n);
    for (size_t i = 0; i < n; ++i) slots[i] = KvSlot{length_ + i};
    float* out = logits_.data();
    logits_for.clear();
    if (all_logits) {
      for (uint32_t i = 0; i < n; ++i) logits_for.push_back(i);
      out += done * vocab;
    } else if (done + n == tokens.size()) {
      logits_for.push_back(static_cast<uint32_t>(n - 1));
    }
    const ForwardBatch batch{.tokens = tokens.subspan(done, n),
                             .positions = positions,
                             .sequence_of_token = seq_of_token,
                             .kv_slots = slots,
                             .sequences = {&sequence, 1},
                             .logits_for = logits_for};
    forward_.forward(batch, kv_, {out, logits_for.size() * vocab});
    length_ += n;
    done += n;
  }
  return logits_;
}

}  // namespace kvs
