// KvStorage accounting: what the manager accepts, and the storage it describes.
#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include "kv/kv_cache_manager.h"

namespace kvs {
namespace {

TEST(KvStorage, TheManagerRejectsTypesOnlyTheCalculatorSizes) {
  for (KvDType type : {KvDType::kInt8, KvDType::kInt4}) {
    auto m = KvCacheManager::create(
        {.spec = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .dtype = type, .block_size = 16},
         .num_blocks = 4});
    ASSERT_FALSE(m);
    EXPECT_NE(m.status().message().find(std::string(kv_dtype_name(type))), std::string::npos) << m.status().message();
  }
  auto f16 = KvCacheManager::create(
      {.spec = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .dtype = KvDType::kF16, .block_size = 16},
       .num_blocks = 4});
  ASSERT_TRUE(f16) << f16.status().message();
  EXPECT_EQ(KvStorage((*f16)->storage_shape()).element_type(), DType::kF16);
}

}  // namespace
}  // namespace kvs
