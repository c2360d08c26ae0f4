#include "engine/batch_builder.h"

namespace kvs {

ForwardBatch ModelInput::view() {
  group_batches.clear();
  for (const Group& g : groups) {
    group_batches.push_back({.kv_slots = g.slots,
                             .attention = {.sequences = g.sequences,
                                           .sequence_of_token = sequence_of_token,
                                           .visible_slots = visible_slots,
                                           .key_tails = g.key_tails}});
  }
  return {.tokens = tokens, .positions = positions, .kv = group_batches, .layers = layers, .logits_for = logits_for};
}

void build_model_input(std::span<const ScheduledChunk> chunks, const HybridKvManager& kv, const KvLayerGroups& layers,
                       ModelInput& in) {
  in.tokens.clear();
  in.positions.clear();
  in.sequence_of_token.clear();
  in.visible_slots.clear();
  in.logits_for.clear();
  in.logits_rows.clear();
  in.layers = &layers;
  in.groups.resize(kv.num_groups());
  for (size_t g = 0; g < kv.num_groups(); ++g) {
    in.groups[g].slots.clear();
    in.groups[g].sequences.clear();
    in.groups[g].key_tails = kv.group(g).key_tails();
  }
  for (size_t c = 0; c < chunks.size(); ++c) {
    const ScheduledChunk& chunk = chunks[c];
    const SequenceState& seq = *chunk.seq;
    const auto seq_index = static_cast<uint32_t>(in.groups[0].sequences.size());
    const size_t end = chunk.first + chunk.num_tokens;
    const bool completes = chunk.completes();
    // Under an eviction policy the kept tokens fill slots [0, slots) in order: the token at p goes to slot p - evicted,
    // which is its RoPE position too (positions within the cache). Without one, evicted is 0.
    const size_t evicted = kv.num_evicted(seq.id);
    for (size_t g = 0; g < kv.num_groups(); ++g) {
      in.groups[g].sequences.push_back({.blocks = kv.group(g).block_table(seq.id),
                                        .num_cached = static_cast<uint32_t>(end - evicted),
                                        .slot_mass = seq.slot_mass,
                                        .window = static_cast<uint32_t>(seq.kv_window)});
    }
    for (size_t p = chunk.first; p < end; ++p) {
      in.tokens.push_back(seq.tokens[p]);
      in.positions.push_back(static_cast<uint32_t>(p - evicted));
      in.sequence_of_token.push_back(seq_index);
      in.visible_slots.push_back(static_cast<uint32_t>(p - evicted + 1));  // causal: slots [0, p - evicted]
      for (size_t g = 0; g < kv.num_groups(); ++g) in.groups[g].slots.push_back(kv.group(g).slot_of(seq.id, p));
      const bool samples = completes && p + 1 == end;
      if (seq.all_logits || samples) {
        in.logits_for.push_back(static_cast<uint32_t>(in.tokens.size() - 1));
        in.logits_rows.push_back({.chunk = c, .position = p, .samples = samples});
      }
    }
  }
}

}  // namespace kvs
