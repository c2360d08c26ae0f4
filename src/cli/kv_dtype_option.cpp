#include "cli/kv_dtype_option.h"

#include <fmt/format.h>

namespace kvs::cli {

void add_kv_dtype_option(CLI::App& command, std::string& kv_dtype) {
  command
      .add_option("--kv-dtype", kv_dtype,
                  "KV cache element type: f32, f16 or bf16 (f16/bf16 halve the cache and the bytes attention reads)")
      ->capture_default_str();
}

KvDType parse_engine_kv_dtype(const std::string& name) {
  const auto dtype = kv_dtype_from_name(name);
  if (!dtype) throw CommandError(fmt::format("unknown --kv-dtype '{}' (f32, f16, bf16)", name));
  if (kv_dtype_quantized(*dtype)) {
    throw CommandError(fmt::format("--kv-dtype {}: the engine stores f32, f16 or bf16 K/V ({} is sized by calc only)",
                                   name, kv_dtype_name(*dtype)));
  }
  return *dtype;
}

}  // namespace kvs::cli
