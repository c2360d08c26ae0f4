#include "gpu/kv_compaction.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tensor/ops.h"

namespace kvs {
namespace {

// A row's place in one layer's pool of a tensor: its head-block's offset from the pool's start, and its row.
struct RowAt {
  VkDeviceSize head_block = 0;
  uint32_t row = 0;
};

// Bytes of a row's per-token (scale, min) set, 0 without.
size_t pair_bytes(const KvTensorFormat& f) {
  return f.scale_axis == KvScaleAxis::kPerToken ? 2 * (f.width / f.group_size) * sizeof(uint16_t) : 0;
}

// A staged row: its bytes, then its scales at a 4-byte boundary.
size_t pair_offset(const KvTensorFormat& f) { return (f.row_bytes() + 3) / 4 * 4; }
size_t staged_stride(const KvTensorFormat& f) { return pair_offset(f) + pair_bytes(f); }

// The regions moving row `from` of `f` to `to` (the row, and its scales): staging at `staged` (gather: pool to
// staging, scatter: staging to pool).
void add_regions(const KvTensorFormat& f, RowAt row, VkDeviceSize staged, bool gather,
                 std::vector<VkBufferCopy>& regions) {
  const VkDeviceSize in_pool = row.head_block + row.row * f.row_bytes();
  regions.push_back(gather ? VkBufferCopy{in_pool, staged, f.row_bytes()}
                           : VkBufferCopy{staged, in_pool, f.row_bytes()});
  if (const size_t pairs = pair_bytes(f); pairs > 0) {
    const VkDeviceSize scales = row.head_block + f.data_bytes() + row.row * pairs;
    regions.push_back(gather ? VkBufferCopy{scales, staged + pair_offset(f), pairs}
                             : VkBufferCopy{staged + pair_offset(f), scales, pairs});
  }
}

// A host-visible buffer holding `values`.
template <class T>
Expected<std::unique_ptr<GpuBuffer>> mapped_copy(VulkanContext& context, const std::vector<T>& values) {
  auto buffer = GpuBuffer::create(context, std::max<size_t>(values.size() * sizeof(T), 16), GpuMemory::kHostVisible);
  if (!buffer) return buffer.status();
  if (!values.empty()) std::memcpy((*buffer)->mapped().data(), values.data(), values.size() * sizeof(T));
  return buffer;
}

}  // namespace

Status compact_on_device(GpuOps& ops, VulkanContext& context, const VulkanKvAllocator& allocator,
                         const KvStorage& storage, const KvCompact& op, const KeyRotation& rotation) {
  const KvFormat& f = storage.format();
  if (!f.v || f.k.scale_axis == KvScaleAxis::kPerChannel) {
    return Status::invalid_argument(
        "compaction moves K and V rows one at a time: keys grouped per channel (or an MLA latent) cannot");
  }
  const size_t heads = f.num_heads, bs = storage.block_size();
  if (op.kept.size() != 1 && op.kept.size() != f.num_layers * heads) {
    return Status::invalid_argument(
        fmt::format("{} kept sets for {} layers x {} heads", op.kept.size(), f.num_layers, heads));
  }
  // Per layer, the moves of its heads: (head, from, to).
  struct Move {
    uint32_t head, from, to;
  };
  std::vector<std::vector<Move>> moves(f.num_layers);
  size_t total = 0;
  uint32_t farthest = 0;
  for (size_t layer = 0; layer < f.num_layers; ++layer) {
    for (size_t h = 0; h < heads; ++h) {
      const std::vector<uint32_t>& rows = op.kept.size() == 1 ? op.kept[0] : op.kept[layer * heads + h];
      for (size_t j = 0; j < rows.size(); ++j) {
        const uint32_t from = rows[j];
        if (from < j || (j > 0 && from <= rows[j - 1])) {
          return Status::invalid_argument(fmt::format("kept slots must ascend: {} at {}", from, j));
        }
        if (from == j) continue;
        if (from / bs >= op.blocks.size() || op.blocks[from / bs] == kNullBlock || op.blocks[j / bs] == kNullBlock) {
          return Status::invalid_argument(fmt::format("compaction through a hole (slot {} to {})", from, j));
        }
        moves[layer].push_back({static_cast<uint32_t>(h), from, static_cast<uint32_t>(j)});
        farthest = std::max<uint32_t>(farthest, from - static_cast<uint32_t>(j));
        ++total;
      }
    }
  }
  if (total == 0) return Status::ok();

  const size_t k_stride = staged_stride(f.k), v_stride = staged_stride(*f.v);
  // Staging: every moved key, then every moved value, in move order across layers.
  auto staging = GpuBuffer::create(context, total * (k_stride + v_stride), GpuMemory::kDeviceLocal);
  if (!staging) return staging.status();
  // The angles of each distance, as the host's KeyShifter turns a key back by it.
  const size_t half = rotation.inv_freq.size();
  std::vector<float> angles((size_t{farthest} + 1) * 2 * half);
  for (uint32_t d = 0; d <= farthest && half > 0; ++d) {
    rope_cos_sin(d, rotation.inv_freq, {&angles[d * 2 * half], half}, {&angles[d * 2 * half + half], half});
  }
  auto angle_buffer = mapped_copy(context, angles);
  if (!angle_buffer) return angle_buffer.status();

  struct LayerWork {
    GpuBuffer *keys = nullptr, *values = nullptr;
    std::vector<VkBufferCopy> gather_k, gather_v, scatter_k, scatter_v;
    std::unique_ptr<GpuBuffer> moves;  // key_shift.comp's
    size_t first = 0;                  // its first move's index in the staging buffer
  };
  std::vector<LayerWork> work(f.num_layers);
  size_t at = 0;
  for (size_t layer = 0; layer < f.num_layers; ++layer) {
    LayerWork& w = work[layer];
    if (moves[layer].empty()) continue;
    const auto* k_base = static_cast<const std::byte*>(storage.keys(layer, BlockId{0}, 0).data);
    const auto* v_base = static_cast<const std::byte*>(storage.values(layer, BlockId{0}, 0).data);
    w.keys = allocator.buffer_at(k_base);
    w.values = allocator.buffer_at(v_base);
    if (w.keys == nullptr || w.values == nullptr) {
      return Status::invalid_argument("a KV pool the device compacts is not on the device");
    }
    w.first = at;
    std::vector<uint32_t> shift;  // per move: destination block, head, slot in block, distance
    for (const Move& m : moves[layer]) {
      const BlockId src = op.blocks[m.from / bs], dst = op.blocks[m.to / bs];
      const auto key_at = [&](BlockId block, uint32_t slot) {
        return RowAt{
            static_cast<VkDeviceSize>(static_cast<const std::byte*>(storage.keys(layer, block, m.head).data) - k_base),
            static_cast<uint32_t>(slot % bs)};
      };
      const auto value_at = [&](BlockId block, uint32_t slot) {
        return RowAt{static_cast<VkDeviceSize>(
                         static_cast<const std::byte*>(storage.values(layer, block, m.head).data) - v_base),
                     static_cast<uint32_t>(slot % bs)};
      };
      const VkDeviceSize staged_k = at * k_stride, staged_v = total * k_stride + at * v_stride;
      add_regions(f.k, key_at(src, m.from), staged_k, true, w.gather_k);
      add_regions(*f.v, value_at(src, m.from), staged_v, true, w.gather_v);
      add_regions(*f.v, value_at(dst, m.to), staged_v, false, w.scatter_v);
      if (half == 0) add_regions(f.k, key_at(dst, m.to), staged_k, false, w.scatter_k);
      shift.insert(shift.end(), {dst.value, m.head, static_cast<uint32_t>(m.to % bs), m.from - m.to});
      ++at;
    }
    if (half > 0) {
      auto buffer = mapped_copy(context, shift);
      if (!buffer) return buffer.status();
      w.moves = std::move(*buffer);
    }
  }

  KVS_RETURN_IF_ERROR(ops.begin_step());
  GpuRecorder& recorder = ops.recorder();
  const auto recorded = [&]() -> Status {
    for (LayerWork& w : work) {  // every read of a moved row before any write
      if (!w.keys) continue;
      KVS_RETURN_IF_ERROR(recorder.copy(*w.keys, **staging, w.gather_k));
      KVS_RETURN_IF_ERROR(recorder.copy(*w.values, **staging, w.gather_v));
    }
    for (size_t layer = 0; layer < work.size(); ++layer) {
      LayerWork& w = work[layer];
      if (!w.keys) continue;
      KVS_RETURN_IF_ERROR(recorder.copy(**staging, *w.values, w.scatter_v));
      if (half == 0) {
        KVS_RETURN_IF_ERROR(recorder.copy(**staging, *w.keys, w.scatter_k));
        continue;
      }
      KVS_RETURN_IF_ERROR(ops.shift_keys(f.k, *w.keys,
                                         {.staged = staging->get(),
                                          .moves = w.moves.get(),
                                          .angles = angle_buffer->get(),
                                          .num_moves = static_cast<uint32_t>(moves[layer].size()),
                                          .staged_stride = static_cast<uint32_t>(k_stride),
                                          .pair_offset = static_cast<uint32_t>(pair_offset(f.k)),
                                          .half = static_cast<uint32_t>(half),
                                          .kv_heads = static_cast<uint32_t>(heads),
                                          .first_move = static_cast<uint32_t>(w.first),
                                          .neox = rotation.neox}));
    }
    return Status::ok();
  }();
  if (!recorded) {
    recorder.abandon();
    return recorded;
  }
  return ops.end_step();
}

}  // namespace kvs
