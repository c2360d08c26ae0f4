// What one forward pass computes: a flat list of tokens from one or more sequences, their RoPE
// positions, and per KV layer group (kv/kv_layer_groups.h: the layers of one attention window share a
// pool) where each token's K/V goes (its slot) and what its attention reads (AttentionBatch: each
// sequence's blocks and cached slots, each token's visible slots). The model never decides placement;
// the caller (KV cache manager, batch builder) does.
#pragma once

#include <cstdint>
#include <span>

#include "attention/attention_batch.h"
#include "core/ids.h"
#include "kv/kv_layer_groups.h"

namespace kvs {

struct KvGroupBatch {
  std::span<const KvSlot> kv_slots;  // [n] where each token's K/V is written in this group's storage
  AttentionBatch attention;          // [n] tokens' sequences (this group's block tables) and visible slots
};

struct ForwardBatch {
  std::span<const TokenId> tokens;        // [n]
  std::span<const uint32_t> positions;    // [n] RoPE position of each token
  std::span<const KvGroupBatch> kv;       // [group]
  const KvLayerGroups* layers = nullptr;  // each model layer's group, storage layer and attention window
  // Tokens (indices into `tokens`) whose next-token logits are wanted, e.g. only the last one of a
  // prompt. Logits come out in this order.
  std::span<const uint32_t> logits_for;
};

}  // namespace kvs
