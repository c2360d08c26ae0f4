// `kvserve bench --device vulkan[:N]`: the model's prefill and decode on the GPU against B*, the read bandwidth the
// probe shader measures in the same run (gpu_model.h), as a Markdown table (stdout) and JSON (--json).
#pragma once

#include <string>
#include <vector>

namespace kvs::cli {

struct GpuBenchOptions {
  std::string model_path;  // the model (the CLI passes its default synthetic 1b Q8_0 file when none is named)
  std::string device;      // vulkan or vulkan:N
  size_t threads = 0;
  size_t reps = 3;
  std::vector<size_t> depths = {0, 1024, 4096};  // decode depths (cached tokens before the first timed one)
  size_t decode_tokens = 64;                     // timed decode tokens a repetition
  size_t prefill_tokens = 512;                   // the timed prompt
  bool profile = false;                          // --profile: per shader kind over the whole run
  std::string json_path;
};

void run_gpu_bench(const GpuBenchOptions& options);

}  // namespace kvs::cli
