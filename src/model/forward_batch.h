// What one forward pass computes: a flat list of tokens from one or more sequences, where each
// token's K/V goes (its slot), its RoPE position, and what its attention reads (AttentionBatch:
// each sequence's blocks and cached slots, each token's visible slots). The model never decides
// placement; the caller (KV cache manager, batch builder) does.
#pragma once

#include <cstdint>
#include <span>

#include "attention/attention_batch.h"
#include "core/ids.h"

namespace kvs {

struct ForwardBatch {
  std::span<const TokenId> tokens;      // [n]
  std::span<const uint32_t> positions;  // [n] RoPE position of each token
  std::span<const KvSlot> kv_slots;     // [n] where each token's K/V is written
  AttentionBatch attention;             // [n] tokens' sequences and visible slots
  // Tokens (indices into `tokens`) whose next-token logits are wanted, e.g. only the last one of a
  // prompt. Logits come out in this order.
  std::span<const uint32_t> logits_for;
};

}  // namespace kvs
