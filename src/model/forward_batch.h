// What one forward pass computes: a flat list of tokens from one or more sequences, where each
// token's K/V goes (its slot) and where each sequence's earlier K/V lives (its block table).
// The model never decides placement; the caller (KV cache manager) does.
#pragma once

#include <cstdint>
#include <span>

#include "core/ids.h"
#include "kv/kv_storage.h"

namespace kvs {

struct SequenceKvView {
  std::span<const BlockId> block_table;  // block i holds positions [i*block_size, (i+1)*block_size)
};

struct ForwardBatch {
  std::span<const TokenId> tokens;              // [n]
  std::span<const uint32_t> positions;          // [n] position of each token within its sequence
  std::span<const uint32_t> sequence_of_token;  // [n] index into `sequences`
  std::span<const KvSlot> kv_slots;             // [n] where each token's K/V is written
  std::span<const SequenceKvView> sequences;
  // Tokens (indices into `tokens`) whose next-token logits are wanted, e.g. only the last one of a
  // prompt. Logits come out in this order.
  std::span<const uint32_t> logits_for;
};

}  // namespace kvs
