#include "kv/tiers/kv_tier.h"

#include <fmt/format.h>
#include <xxhash.h>

#include "kv/kv_format.h"
#include "kv/kv_sizing.h"

namespace kvs {
namespace {

std::string describe(const KvTensorFormat& t) {
  return fmt::format("{}x{} {} scales {}/{}{}", t.rows, t.width, kv_dtype_name(t.element),
                     static_cast<int>(t.scale_axis), t.group_size, t.rotated ? " rotated" : "");
}

}  // namespace

TierFormat tier_format(const KvCacheSpec& spec) {
  const KvFormat f = kv_format(spec);
  TierFormat out;
  out.description = fmt::format("kvserve KV block v1: {} layers x {} heads, {} {}", f.num_layers, f.num_heads,
                                spec.mla ? "latent" : "K", describe(f.k));
  if (f.v) out.description += fmt::format(", V {}", describe(*f.v));
  out.block_bytes = kv_bytes_per_block(spec).total();
  out.fingerprint = XXH3_64bits(out.description.data(), out.description.size());
  return out;
}

}  // namespace kvs
