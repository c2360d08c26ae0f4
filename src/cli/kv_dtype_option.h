// The KV cache's precision flags, shared by every command that runs the model (run, serve,
// perplexity, bench) and by calc: --kv-dtype sets K and V, --kv-dtype-k / --kv-dtype-v set one of
// them; --kv-key-scales and --kv-rotate-keys choose how quantized keys are grouped and whether they
// are stored Hadamard-rotated.
#pragma once

#include <string>

#include "cli/commands.h"
#include "core/kv_dtype.h"

namespace kvs::cli {

struct KvPrecisionOptions {
  std::string both = "f32";            // --kv-dtype (each command sets its default)
  std::string k = {};                  // --kv-dtype-k: "" = as --kv-dtype
  std::string v = {};                  // --kv-dtype-v: "" = as --kv-dtype
  std::string key_scales = "channel";  // --kv-key-scales
  bool rotate_keys = false;            // --kv-rotate-keys
};

struct KvPrecision {
  KvDTypes dtype = {};
  KvScaleAxis key_scale_axis = KvScaleAxis::kPerChannel;
  bool rotate_keys = false;
};

void add_kv_precision_options(CLI::App& command, KvPrecisionOptions& options);
// Throws CommandError naming the flag and the value when one is unknown.
KvPrecision parse_kv_precision(const KvPrecisionOptions& options);

}  // namespace kvs::cli
