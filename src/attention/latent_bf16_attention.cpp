#include "attention/latent_bf16_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"

namespace kvs {
namespace {

constexpr size_t kSlots = Bf16LatentPartial::kSlots, kHalf = kSlots / 2;

}  // namespace

LatentBf16Attention::LatentBf16Attention(ThreadPool& pool, const AttentionShape& shape,
                                         std::optional<LatentKernel> kernel)
    : pool_(pool), shape_(shape), kernel_(kernel), stage_(pool.num_threads()) {
  KVS_ASSERT(!kernel || latent_kernel_usable(*kernel), "{} latent attention on a CPU (or process) without it",
             latent_kernel_name(*kernel));
  KVS_ASSERT(shape.num_kv_heads == 1 && shape.value_width() == shape.head_dim,
             "latent attention reads one latent of {} as key and value, not {} KV heads of values {} wide",
             shape.head_dim, shape.num_kv_heads, shape.value_width());
}

bool LatentBf16Attention::applies(const KvStorage& kv, const AttentionBatch& batch, size_t window) const {
  const KvTensorFormat& k = kv.format().k;
  if (!kernel_ || kv.has_values() || k.element != KvDType::kBF16 || k.rotated) return false;
  if (k.width != shape_.head_dim || k.width % 32 != 0 || k.width > Bf16LatentPartial::kMaxWidth) return false;
  if (window > 0) return false;
  return std::none_of(batch.sequences.begin(), batch.sequences.end(),
                      [](const SequenceAttention& s) { return bool(s.slot_mass) || s.window > 0; });
}

void LatentBf16Attention::run(const KvStorage& kv, size_t layer, const AttentionBatch& batch, std::span<const float> q,
                              std::span<float> out) {
  const size_t n = batch.sequence_of_token.size(), heads = shape_.num_heads, width = shape_.head_dim;
  const size_t row_width = heads * width, block_size = kv.block_size(), threads = pool_.num_threads();
  KVS_ASSERT(batch.visible_slots.size() == n && q.size() >= n * row_width && out.size() >= n * row_width,
             "latent attention of {} tokens: {} visible-slot counts, q {} and out {} floats for rows of {}", n,
             batch.visible_slots.size(), q.size(), out.size(), row_width);
  if (n == 0) return;
  // Fewer tokens than threads: each token's slots in `parts` runs of whole 32-slot steps, merged after. Otherwise a
  // token is one run, merged (normalised) by the thread that ran it.
  const size_t parts = n < threads ? (threads + n - 1) / n : 1;
  runs_.resize(std::max(threads, parts > 1 ? n * parts : 0));
  const float scale = 1.0f / std::sqrt(static_cast<float>(width));
  pool_.for_chunks(n * parts, [&](size_t item, size_t thread) {
    const size_t t = item / parts, part = item % parts;
    const SequenceAttention& seq = batch.sequences[batch.sequence_of_token[t]];
    const size_t visible = batch.visible_slots[t];
    KVS_ASSERT(visible >= 1 && visible <= seq.num_cached, "token {} sees {} slots of a sequence holding {}", t, visible,
               seq.num_cached);
    const size_t steps = (visible + kSlots - 1) / kSlots;
    const size_t begin = steps * part / parts * kSlots, end = std::min(visible, steps * (part + 1) / parts * kSlots);
    Bf16LatentPartial& run = runs_[parts > 1 ? item : thread];
    run.start(*kernel_, &q[t * row_width], heads, width, scale);
    AlignedBuffer<uint16_t>& stage = stage_[thread];
    stage.ensure_size(kSlots * width);
    // Rows [slot, slot + 16): in place when all 16 are real rows of one block, else gathered into the stage's half.
    const auto half_rows = [&](size_t slot, size_t half) -> const uint16_t* {
      const size_t rows = slot < end ? std::min(kHalf, end - slot) : 0;
      const auto row_of = [&](size_t s) {
        const BlockId block = seq.blocks[s / block_size];
        KVS_ASSERT(block != kNullBlock, "slot {} of a latent lies in a hole", s);
        return static_cast<const uint16_t*>(kv.keys(layer, block, 0).data) + s % block_size * width;
      };
      if (rows == kHalf && slot % block_size + kHalf <= block_size) return row_of(slot);  // all in one block
      uint16_t* staged = stage.data() + half * kHalf * width;
      for (size_t r = 0; r < rows; ++r) std::memcpy(staged + r * width, row_of(slot + r), width * sizeof(uint16_t));
      std::fill_n(staged + rows * width, (kHalf - rows) * width, uint16_t{0});
      return staged;
    };
    for (size_t slot = begin; slot < end; slot += kSlots) {
      const uint16_t* first = half_rows(slot, 0);
      const uint16_t* second = half_rows(slot + kHalf, 1);
      run.add(first, second, std::min(kSlots, end - slot));
    }
    if (parts == 1) {
      const Bf16LatentPartial* one[] = {&run};
      merge_latent_partials(one, heads, width, &out[t * row_width]);
    }
  });
  if (parts == 1) return;
  for (size_t t = 0; t < n; ++t) {
    merging_.clear();
    for (size_t part = 0; part < parts; ++part) merging_.push_back(&runs_[t * parts + part]);
    merge_latent_partials(merging_, heads, width, &out[t * row_width]);
  }
}

}  // namespace kvs
