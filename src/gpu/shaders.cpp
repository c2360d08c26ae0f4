#include "gpu/shaders.h"

namespace kvs::shaders {
namespace {

// glslc -mfmt=num: the words as a comma-separated list (the build's shaders/ directory).
constexpr uint32_t kStreamSum[] = {
#include "stream_sum.spv.inc"
};

}  // namespace

std::span<const uint32_t> stream_sum() { return kStreamSum; }

}  // namespace kvs::shaders
