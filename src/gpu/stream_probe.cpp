#include "gpu/stream_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "gpu/gpu_recorder.h"
#include "gpu/shaders.h"

namespace kvs {

Expected<std::unique_ptr<StreamProbe>> StreamProbe::create(VulkanContext& context) {
  std::unique_ptr<StreamProbe> probe(new StreamProbe(context));
  const uint32_t specialization[] = {kWorkgroup};
  auto pipeline = ComputePipeline::create(context, shaders::stream_sum(), 2, sizeof(uint32_t), specialization);
  if (!pipeline) return pipeline.status();
  probe->pipeline_ = std::move(*pipeline);
  auto sums = GpuBuffer::create(context, kMaxWorkgroups * sizeof(uint32_t), GpuMemory::kHostVisible);
  if (!sums) return sums.status();
  probe->sums_ = std::move(*sums);
  return probe;
}

Status StreamProbe::check(const GpuBuffer& data, size_t words) const {
  if (words % 4 != 0 || words * sizeof(uint32_t) > data.bytes()) {
    return Status::invalid_argument(fmt::format(
        "the probe reads whole uvec4s within the buffer: {} words of a buffer of {} bytes", words, data.bytes()));
  }
  if (words * sizeof(uint32_t) > context_.info().max_storage_buffer_range) {
    return Status::invalid_argument(fmt::format("{} bytes exceed one binding's range on {} ({} bytes)",
                                                words * sizeof(uint32_t), context_.info().name,
                                                context_.info().max_storage_buffer_range));
  }
  return Status::ok();
}

uint32_t StreamProbe::groups(size_t words) const {
  const uint32_t count = static_cast<uint32_t>(words / 4);
  return std::clamp<uint32_t>((count + kWorkgroup - 1) / kWorkgroup, 1, kMaxWorkgroups);
}

uint32_t StreamProbe::total() const {
  // Only the workgroups of the last pass wrote; the others hold zeros from before (the buffer is cleared first).
  uint32_t total = 0, part = 0;
  for (uint32_t g = 0; g < kMaxWorkgroups; ++g) {
    std::memcpy(&part, sums_->mapped().data() + g * sizeof(uint32_t), sizeof(part));
    total += part;
  }
  return total;
}

Expected<uint32_t> StreamProbe::sum(GpuBuffer& data, size_t words) {
  KVS_RETURN_IF_ERROR(check(data, words));
  const uint32_t count = static_cast<uint32_t>(words / 4);
  std::memset(sums_->mapped().data(), 0, sums_->mapped().size());
  GpuBuffer* const buffers[] = {&data, sums_.get()};
  pipeline_->bind(buffers);
  KVS_RETURN_IF_ERROR(context_.run([&](VkCommandBuffer c) { pipeline_->record(c, &count, groups(words)); }));
  return total();
}

Expected<StreamProbe::Timed> StreamProbe::timed_sum(GpuBuffer& data, size_t words) {
  KVS_RETURN_IF_ERROR(check(data, words));
  const uint32_t count = static_cast<uint32_t>(words / 4);
  std::memset(sums_->mapped().data(), 0, sums_->mapped().size());
  auto recorder = GpuRecorder::create(context_);
  if (!recorder) return recorder.status();
  GpuProfile profile;
  const bool stamps = context_.timestamp_bits() > 0;
  if (stamps) KVS_RETURN_IF_ERROR((*recorder)->set_profile(&profile));
  GpuBuffer* const buffers[] = {&data, sums_.get()};
  KVS_RETURN_IF_ERROR((*recorder)->begin());
  KVS_RETURN_IF_ERROR((*recorder)->dispatch(*pipeline_, buffers, &count, groups(words), 1, "stream_sum"));
  const auto start = std::chrono::steady_clock::now();
  KVS_RETURN_IF_ERROR((*recorder)->submit());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<GpuKernelTime> kinds = profile.kinds();
  return Timed{.sum = total(), .seconds = stamps && !kinds.empty() ? kinds[0].seconds : wall};
}

}  // namespace kvs
