#include "cli/kv_dtype_option.h"

#include <fmt/format.h>

namespace kvs::cli {
namespace {

KvDType parse_type(const std::string& flag, const std::string& name) {
  const auto dtype = kv_dtype_from_name(name);
  if (!dtype) throw CommandError(fmt::format("unknown {} '{}' (f32, f16, bf16, int8, int4)", flag, name));
  return *dtype;
}

}  // namespace

void add_kv_precision_options(CLI::App& command, KvPrecisionOptions& options) {
  command
      .add_option("--kv-dtype", options.both,
                  "KV cache element type of K and V: f32, f16, bf16, int8 or int4 (16-bit types halve the cache, "
                  "int8 and int4 store integers with a scale and min per group)")
      ->capture_default_str();
  command.add_option("--kv-dtype-k", options.k, "Element type of the keys alone (default: --kv-dtype)");
  command.add_option("--kv-dtype-v", options.v, "Element type of the values alone (default: --kv-dtype)");
  command
      .add_option(
          "--kv-key-scales", options.key_scales,
          "Grouping of int8/int4 keys: channel (a scale and min per channel for each 16 tokens: KIVI's "
          "grouping for outlier channels; a filling group waits in 16 bits until it is complete) or token (per 32 "
          "elements of a row, as values; nothing depends on how prompts are chunked)")
      ->capture_default_str();
  command.add_flag("--kv-rotate-keys", options.rotate_keys,
                   "Store keys Hadamard-rotated (queries are rotated alike): spreads outlier channels before "
                   "quantization; needs a power-of-two head dim");
}

KvPrecision parse_kv_precision(const KvPrecisionOptions& options) {
  const KvDType both = parse_type("--kv-dtype", options.both);
  KvPrecision p{.dtype = {options.k.empty() ? both : parse_type("--kv-dtype-k", options.k),
                          options.v.empty() ? both : parse_type("--kv-dtype-v", options.v)},
                .rotate_keys = options.rotate_keys};
  const auto axis = kv_scale_axis_from_name(options.key_scales);
  if (!axis) throw CommandError(fmt::format("unknown --kv-key-scales '{}' (channel, token)", options.key_scales));
  p.key_scale_axis = *axis;
  return p;
}

}  // namespace kvs::cli
