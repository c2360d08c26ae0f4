// The one place a step's model input is built: from the scheduler's plan and the KV manager's block
// tables, every scheduled token with its RoPE position, its sequence and the slots it sees, and per KV
// layer group the slot its K/V go to and the blocks its attention reads, and the tokens whose logits
// are wanted.
#pragma once

#include <vector>

#include "engine/scheduler.h"
#include "kv/hybrid_kv_manager.h"
#include "model/forward_batch.h"

namespace kvs {

// Owns the arrays a ForwardBatch views; reused across steps.
struct ModelInput {
  std::vector<TokenId> tokens;
  std::vector<uint32_t> positions, sequence_of_token, visible_slots, logits_for;
  struct Group {
    std::vector<KvSlot> slots;
    std::vector<SequenceAttention> sequences;
    std::span<const uint32_t> key_tails;  // the group's KV manager's [block] -> key tail
  };
  std::vector<Group> groups;
  const KvLayerGroups* layers = nullptr;
  // For logits row i: the chunk (index into the plan), the position of the token it follows, and whether
  // the next token is sampled from it (the last token of a chunk that completes its sequence).
  struct LogitsRow {
    size_t chunk = 0;
    size_t position = 0;
    bool samples = false;
  };
  std::vector<LogitsRow> logits_rows;
  std::vector<KvGroupBatch> group_batches;  // what view() hands out

  ForwardBatch view();
};

// Blocks of every chunk must be reserved. Logits: a chunk's last token when it completes its
// sequence, and every token of a sequence that asks for all logits.
void build_model_input(std::span<const ScheduledChunk> chunks, const HybridKvManager& kv, const KvLayerGroups& layers,
                       ModelInput& input);

}  // namespace kvs
