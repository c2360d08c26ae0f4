// The Llama family (GGUF llama and qwen2: Llama 1-3.x, Mistral, Qwen2/2.5) on a Vulkan device: the Model the engine
// runs with --device vulkan[:N]. Vulkan-free, so a build without Vulkan still links (src/gpu/absent says why not).
#pragma once

#include <memory>

#include "core/status.h"
#include "model/decoder_model.h"

namespace kvs {

// `model` (loaded with WeightPacking::kNone: rows in the file's layout) on Vulkan device `device`: its weights
// uploaded in their file's types, its KV pools in the device's mapped memory. Errors name what the GPU path does not
// run yet (architecture, weight type, RoPE on part of a head, a tensor larger than one binding) or the device fault.
// `model` must outlive the result.
Expected<std::unique_ptr<Model>> make_gpu_model(const DecoderModel& model, size_t device);

}  // namespace kvs
