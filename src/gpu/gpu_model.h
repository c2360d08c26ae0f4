// The Llama family (GGUF llama and qwen2: Llama 1-3.x, Mistral, Qwen2/2.5) on a Vulkan device: the Model the engine
// runs with --device vulkan[:N], what it holds in the device's memory, and its --profile. Vulkan-free, so a build
// without Vulkan still links (src/gpu/absent says why not).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/gpu_profile.h"
#include "kv/kv_cache_spec.h"
#include "model/decoder_model.h"

namespace kvs {

struct GpuModelOptions {
  bool profile = false;  // --profile: timestamps per dispatch, summed per shader kind (gpu_profile())
  // The most bytes one part of a matrix spans (0: one storage binding of the device): tests split small matrices.
  uint64_t max_binding_bytes = 0;
};

// `model` (loaded with WeightPacking::kNone: rows in the file's layout) on Vulkan device `device`: its weights
// uploaded in their file's types, its KV pools in the device's mapped memory. Errors name what the GPU path does not
// run yet (architecture, weight type, RoPE on part of a head) or the device fault (out of device memory names the
// bytes). `model` must outlive the result.
Expected<std::unique_ptr<Model>> make_gpu_model(const DecoderModel& model, size_t device, GpuModelOptions options = {});

// What a model on the GPU holds in the device's memory, and what is left for its KV pool.
struct GpuMemoryReport {
  std::string device;             // "vulkan:0 (NVIDIA H100 80GB HBM3)"
  uint64_t weight_bytes = 0;      // the weights as uploaded, in their file's types
  uint64_t activation_bytes = 0;  // one step's buffers at the largest batch: max_batch_tokens tokens, full context
  uint64_t free_bytes = 0;        // device memory still free (the driver's budget where it reports one)
  // The KV pool's size when none is asked for: 90% of what is free after the activations, and no layer's pool
  // larger than one storage binding may span.
  uint64_t kv_budget_bytes = 0;
};
// Of a make_gpu_model result, for a cache of `spec` and steps of up to `max_batch_tokens`; an error for another model.
Expected<GpuMemoryReport> gpu_memory_report(const Model& model, const KvCacheSpec& spec, size_t max_batch_tokens);

// The start-up line: the device, weights, activations and the KV pool's bytes (in the device's memory, or in host
// memory where the device maps none of its own), the tokens and full-context sequences the pool holds, and the device
// memory still free.
std::string gpu_memory_line(const Model& model, const GpuMemoryReport& report, size_t kv_blocks, size_t block_size);

// B*, the device's streaming read bandwidth: the probe shader (shaders/stream_sum.comp) reading a device-local
// buffer of about `bytes` (at most one binding, a quarter of the free memory) `reps` times; the fastest pass, timed
// by the device's timestamps. An error when a pass's sum shows a word went unread.
struct GpuBandwidth {
  uint64_t bytes = 0;
  double seconds = 0.0;  // the fastest pass
  double bytes_per_second() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0; }
};
Expected<GpuBandwidth> gpu_stream_bandwidth(const Model& model, uint64_t bytes, size_t reps);

// --profile's per-kind times over the run so far (empty without --profile or off the GPU), and the steps profiled.
std::vector<GpuKernelTime> gpu_profile(const Model& model, uint64_t* steps = nullptr);

}  // namespace kvs
