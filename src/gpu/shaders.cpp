#include "gpu/shaders.h"

namespace kvs::shaders {
namespace {

// glslc -mfmt=num: the words as a comma-separated list (the build's shaders/ directory).
constexpr uint32_t kStreamSum[] = {
#include "stream_sum.spv.inc"
};
constexpr uint32_t kRmsnorm[] = {
#include "rmsnorm.spv.inc"
};
constexpr uint32_t kMatvec[] = {
#include "matvec.spv.inc"
};
constexpr uint32_t kRope[] = {
#include "rope.spv.inc"
};
constexpr uint32_t kGlu[] = {
#include "glu.spv.inc"
};
constexpr uint32_t kScale[] = {
#include "scale.spv.inc"
};
constexpr uint32_t kAdd[] = {
#include "add.spv.inc"
};
constexpr uint32_t kGetRows[] = {
#include "get_rows.spv.inc"
};
constexpr uint32_t kKvWrite[] = {
#include "kv_write.spv.inc"
};
constexpr uint32_t kKeyTailWrite[] = {
#include "key_tail_write.spv.inc"
};
constexpr uint32_t kKeySeal[] = {
#include "key_seal.spv.inc"
};
constexpr uint32_t kHadamard[] = {
#include "hadamard.spv.inc"
};
constexpr uint32_t kKeyShift[] = {
#include "key_shift.spv.inc"
};
constexpr uint32_t kKvRead[] = {
#include "kv_read.spv.inc"
};
constexpr uint32_t kCopy[] = {
#include "copy.spv.inc"
};
constexpr uint32_t kMoeRoute[] = {
#include "moe_route.spv.inc"
};
constexpr uint32_t kMoeCombine[] = {
#include "moe_combine.spv.inc"
};
constexpr uint32_t kSlotMass[] = {
#include "slot_mass.spv.inc"
};
constexpr uint32_t kPagedAttention[] = {
#include "paged_attention.spv.inc"
};

}  // namespace

std::span<const uint32_t> stream_sum() { return kStreamSum; }
std::span<const uint32_t> rmsnorm() { return kRmsnorm; }
std::span<const uint32_t> matvec() { return kMatvec; }
std::span<const uint32_t> paged_attention() { return kPagedAttention; }
std::span<const uint32_t> slot_mass() { return kSlotMass; }
std::span<const uint32_t> copy() { return kCopy; }
std::span<const uint32_t> kv_read() { return kKvRead; }
std::span<const uint32_t> moe_route() { return kMoeRoute; }
std::span<const uint32_t> moe_combine() { return kMoeCombine; }
std::span<const uint32_t> key_shift() { return kKeyShift; }
std::span<const uint32_t> kv_write() { return kKvWrite; }
std::span<const uint32_t> key_tail_write() { return kKeyTailWrite; }
std::span<const uint32_t> key_seal() { return kKeySeal; }
std::span<const uint32_t> hadamard() { return kHadamard; }
std::span<const uint32_t> get_rows() { return kGetRows; }
std::span<const uint32_t> add() { return kAdd; }
std::span<const uint32_t> glu() { return kGlu; }
std::span<const uint32_t> scale() { return kScale; }
std::span<const uint32_t> rope() { return kRope; }

}  // namespace kvs::shaders
