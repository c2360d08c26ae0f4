// gpu_model.h's reports on a model on the GPU: its memory and its --profile.
#include <algorithm>

#include "core/byte_size.h"
#include "gpu/gpu_decoder_model.h"
#include "gpu/stream_probe.h"
#include "kv/kv_sizing.h"

namespace kvs {
namespace {

constexpr double kHeadroom = 1.5;      // the runner grows a step buffer by half again (gpu_decoder_runner.cpp)
constexpr double kUtilization = 0.90;  // of the free memory, what the pool takes by default (vLLM's default too)

const GpuDecoderModel* on_gpu(const Model& model) { return dynamic_cast<const GpuDecoderModel*>(&model); }

}  // namespace

Expected<GpuMemoryReport> gpu_memory_report(const Model& model, const KvCacheSpec& spec, size_t max_batch_tokens) {
  const GpuDecoderModel* gpu = on_gpu(model);
  if (gpu == nullptr) return Status::invalid_argument("gpu_memory_report: the model does not run on the GPU");
  const ModelConfig& c = gpu->shard_config();  // this rank's heads and FFN under tensor parallelism
  const VulkanContext& context = gpu->context();
  const double n = static_cast<double>(std::max<size_t>(1, max_batch_tokens));
  const double context_length = static_cast<double>(c.context_length);
  // The runner's step buffers (gpu_decoder_runner.cpp): activations, the attention scratch of every visible slot,
  // the gathered rows and the logits (at most one per token).
  const double hidden = static_cast<double>(std::max(c.ffn_dim, c.moe.shared_experts * c.moe.expert_ffn_dim));
  double activations = n * (3.0 * c.dim + 2.0 * c.q_dim() + 2.0 * c.kv_dim() + 2.0 * hidden) +
                       n * c.num_heads * context_length + n * (2.0 * c.dim + c.vocab_size);
  if (c.is_mla()) {  // gpu_decoder_runner_mla.cpp: the absorbed form's rows, and the expanded form's of a whole context
    const double width = static_cast<double>(c.latent_width()), r = static_cast<double>(c.mla.kv_lora_rank);
    const double heads = static_cast<double>(c.num_heads), value = static_cast<double>(c.mla.value_dim);
    activations += n * (c.mla.q_lora_rank + width + heads * (width + r + value));
    activations += context_length * (width + heads * (c.mla.nope_dim + value) + heads * (c.head_dim + value));
  }
  if (c.moe.num_experts > 0) {  // the router's logits, each choice's id and weight, hidden states and output
    const double k = static_cast<double>(c.moe.experts_used);
    activations += n * (c.moe.num_experts + k * (2.0 + 2.0 * c.moe.expert_ffn_dim + c.dim));
  }
  GpuMemoryReport r{.device = fmt::format("vulkan:{} ({})", gpu->device_index(), context.info().name),
                    .weight_bytes = gpu->weight_bytes(),
                    .activation_bytes = static_cast<uint64_t>(activations * sizeof(float) * kHeadroom),
                    .free_bytes = context.device_memory_available()};
  const uint64_t after = r.free_bytes > r.activation_bytes ? r.free_bytes - r.activation_bytes : 0;
  r.kv_budget_bytes = static_cast<uint64_t>(static_cast<double>(after) * kUtilization);
  // One layer's K (or V) pool is one binding: blocks x kv_heads x block_size x width elements.
  const size_t widest =
      spec.num_kv_heads * spec.block_size *
      std::max(spec.head_dim * kv_dtype_bits(spec.dtype.k), spec.value_width() * kv_dtype_bits(spec.dtype.v)) / 8;
  if (widest > 0) {
    const uint64_t blocks = context.info().max_storage_buffer_range / widest;
    r.kv_budget_bytes = std::min<uint64_t>(r.kv_budget_bytes, blocks * kv_bytes_per_block(spec).total());
  }
  return r;
}

std::string gpu_memory_line(const Model& model, const GpuMemoryReport& r, size_t kv_blocks, size_t block_size) {
  const GpuDecoderModel* gpu = on_gpu(model);
  if (gpu == nullptr) return {};
  const VulkanKvAllocator::Usage kv = gpu->allocator().usage();
  const size_t tokens = kv_blocks * block_size, context = gpu->config().context_length;
  const std::string where = kv.host_bytes == 0
                                ? "in device memory"
                                : fmt::format(
                                      "{} of them in host memory the GPU reads across the bus (the device maps "
                                      "none of its own memory that large)",
                                      format_byte_size(kv.host_bytes));
  const std::string holds = tokens >= context
                                ? fmt::format("{} sequences of the full context of {}", tokens / context, context)
                                : fmt::format("less than the full context of {}", context);
  return fmt::format(
      "{}: weights {}, activations up to {}, KV pool {} {} ({} blocks of {} tokens: {} tokens, {}); {} of device "
      "memory still free",
      r.device, format_byte_size(r.weight_bytes), format_byte_size(r.activation_bytes), format_byte_size(kv.bytes),
      where, kv_blocks, block_size, tokens, holds, format_byte_size(r.free_bytes));
}

Expected<GpuBandwidth> gpu_stream_bandwidth(const Model& model, uint64_t bytes, size_t reps) {
  const GpuDecoderModel* gpu = on_gpu(model);
  if (gpu == nullptr) return Status::invalid_argument("gpu_stream_bandwidth: the model does not run on the GPU");
  VulkanContext& context = gpu->context();
  bytes = std::min<uint64_t>({bytes, context.info().max_storage_buffer_range, context.device_memory_available() / 4});
  bytes -= bytes % 16;  // whole uvec4s
  if (bytes == 0)
    return Status::out_of_memory(fmt::format("no device memory for the bandwidth probe on {}", context.info().name));
  auto buffer = GpuBuffer::create(context, bytes, GpuMemory::kDeviceLocal);
  if (!buffer) return buffer.status();
  constexpr uint32_t kWord = 0x01010101u;  // every word; the sum of n of them is n * kWord mod 2^32
  KVS_RETURN_IF_ERROR((*buffer)->fill(kWord));
  auto probe = StreamProbe::create(context);
  if (!probe) return probe.status();
  const size_t words = bytes / 4;
  GpuBandwidth best{.bytes = bytes, .seconds = 0.0};
  for (size_t r = 0; r < std::max<size_t>(1, reps); ++r) {
    auto pass = (*probe)->timed_sum(**buffer, words);
    if (!pass) return pass.status();
    if (pass->sum != static_cast<uint32_t>(words * kWord)) {
      return Status::io_error(fmt::format("the bandwidth probe's sum {:#x} is not {:#x}: a word went unread", pass->sum,
                                          static_cast<uint32_t>(words * kWord)));
    }
    if (best.seconds == 0.0 || pass->seconds < best.seconds) best.seconds = pass->seconds;
  }
  return best;
}

std::vector<GpuKernelTime> gpu_profile(const Model& model, uint64_t* steps) {
  const GpuDecoderModel* gpu = on_gpu(model);
  GpuProfile* profile = gpu != nullptr ? gpu->profile() : nullptr;
  if (steps != nullptr) *steps = profile != nullptr ? profile->steps() : 0;
  return profile != nullptr ? profile->kinds() : std::vector<GpuKernelTime>{};
}

}  // namespace kvs
