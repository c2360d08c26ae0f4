#include "engine/batch_builder.h"

namespace kvs {

void build_model_input(std::span<const ScheduledChunk> chunks, const KvCacheManager& kv, ModelInput& in) {
  in.tokens.clear();
  in.positions.clear();
  in.sequence_of_token.clear();
  in.visible_slots.clear();
  in.logits_for.clear();
  in.slots.clear();
  in.sequences.clear();
  in.logits_rows.clear();
  in.key_tails = kv.key_tails();
  for (size_t c = 0; c < chunks.size(); ++c) {
    const ScheduledChunk& chunk = chunks[c];
    const SequenceState& seq = *chunk.seq;
    const auto seq_index = static_cast<uint32_t>(in.sequences.size());
    const size_t end = chunk.first + chunk.num_tokens;
    const bool completes = chunk.completes();
    in.sequences.push_back({.blocks = kv.block_table(seq.id), .num_cached = static_cast<uint32_t>(end)});
    for (size_t p = chunk.first; p < end; ++p) {
      in.tokens.push_back(seq.tokens[p]);
      in.positions.push_back(static_cast<uint32_t>(p));
      in.sequence_of_token.push_back(seq_index);
      in.visible_slots.push_back(static_cast<uint32_t>(p + 1));  // causal: slots [0, p]
      in.slots.push_back(kv.slot_of(seq.id, p));
      const bool samples = completes && p + 1 == end;
      if (seq.all_logits || samples) {
        in.logits_for.push_back(static_cast<uint32_t>(in.tokens.size() - 1));
        in.logits_rows.push_back({.chunk = c, .position = p, .samples = samples});
      }
    }
  }
}

}  // namespace kvs
