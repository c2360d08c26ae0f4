// attention/compact_kv.h's compaction of one sequence, on the device (the KV op log's KvCompact for pools in device
// memory): every row a policy keeps moves to the front of its sequence, the moved keys re-rotated to their new
// positions, without a byte crossing the bus. One submission: the moved rows of every layer (K and V, with their
// per-token scales) are first gathered into a staging buffer, then values are copied to their new slots and keys
// re-rotated into theirs by key_shift.comp (so a move never reads a row another move already overwrote); rows that
// stay keep every bit.
#pragma once

#include "attention/compact_kv.h"
#include "gpu/gpu_ops.h"
#include "gpu/vulkan_kv_allocator.h"
#include "kv/kv_ops.h"
#include "kv/kv_storage.h"

namespace kvs {

// Applies `op` to `storage`, whose pools are `allocator`'s on `context`, with `ops` (no step of it open). Refused as
// the host's compact_kv refuses: keys per channel (their scales span rows), a latent without values, kept slots that do
// not ascend or pass through a hole.
Status compact_on_device(GpuOps& ops, VulkanContext& context, const VulkanKvAllocator& allocator,
                         const KvStorage& storage, const KvCompact& op, const KeyRotation& rotation);

}  // namespace kvs
