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

}  // namespace

std::span<const uint32_t> stream_sum() { return kStreamSum; }
std::span<const uint32_t> rmsnorm() { return kRmsnorm; }
std::span<const uint32_t> matvec() { return kMatvec; }

}  // namespace kvs::shaders
