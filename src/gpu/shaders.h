// The SPIR-V of src/gpu/shaders/*.comp, compiled by glslc at build time and embedded in the binary.
#pragma once

#include <cstdint>
#include <span>

namespace kvs::shaders {

std::span<const uint32_t> stream_sum();       // shaders/stream_sum.comp
std::span<const uint32_t> rmsnorm();          // shaders/rmsnorm.comp
std::span<const uint32_t> matvec();           // shaders/matvec.comp
std::span<const uint32_t> rope();             // shaders/rope.comp
std::span<const uint32_t> glu();              // shaders/glu.comp
std::span<const uint32_t> scale();            // shaders/scale.comp
std::span<const uint32_t> add();              // shaders/add.comp
std::span<const uint32_t> get_rows();         // shaders/get_rows.comp
std::span<const uint32_t> kv_write();         // shaders/kv_write.comp
std::span<const uint32_t> paged_attention();  // shaders/paged_attention.comp
std::span<const uint32_t> slot_mass();        // shaders/slot_mass.comp
std::span<const uint32_t> copy();             // shaders/copy.comp
std::span<const uint32_t> kv_read();          // shaders/kv_read.comp
std::span<const uint32_t> moe_route();        // shaders/moe_route.comp
std::span<const uint32_t> moe_combine();      // shaders/moe_combine.comp
std::span<const uint32_t> key_shift();        // shaders/key_shift.comp
std::span<const uint32_t> key_tail_write();   // shaders/key_tail_write.comp
std::span<const uint32_t> key_seal();         // shaders/key_seal.comp
std::span<const uint32_t> hadamard();         // shaders/hadamard.comp

}  // namespace kvs::shaders
