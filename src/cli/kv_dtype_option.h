// --kv-dtype: the element type of the KV cache for the commands that run the model (run, serve,
// perplexity). The engine stores f32, f16 or bf16; calc also sizes int8 and int4.
#pragma once

#include <string>

#include "cli/commands.h"
#include "core/kv_dtype.h"

namespace kvs::cli {

void add_kv_dtype_option(CLI::App& command, std::string& kv_dtype);
// Throws CommandError naming the value when it is unknown or not one the engine stores.
KvDType parse_engine_kv_dtype(const std::string& name);

}  // namespace kvs::cli
