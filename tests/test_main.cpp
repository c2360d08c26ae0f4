// The main of every test binary: GoogleTest, with the kernels' ISA limited by KVS_ISA (scalar, avx2,
// avx512) so that one host runs the whole suite on each path it has (CI does; see .ci/run).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "tensor/isa.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const char* name = std::getenv("KVS_ISA"); name && *name) {
    const auto isa = kvs::isa_from_name(name);
    if (!isa) {
      std::fprintf(stderr, "KVS_ISA must be scalar, avx2, avxvnni or avx512, got '%s'\n", name);
      return 2;
    }
    kvs::set_isa_limit(*isa);
  }
  return RUN_ALL_TESTS();
}
