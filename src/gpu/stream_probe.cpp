#include "gpu/stream_probe.h"

#include <algorithm>
#include <cstring>

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

Expected<uint32_t> StreamProbe::sum(GpuBuffer& data, size_t words) {
  if (words % 4 != 0 || words * sizeof(uint32_t) > data.bytes()) {
    return Status::invalid_argument(fmt::format(
        "the probe reads whole uvec4s within the buffer: {} words of a buffer of {} bytes", words, data.bytes()));
  }
  if (words * sizeof(uint32_t) > context_.info().max_storage_buffer_range) {
    return Status::invalid_argument(fmt::format("{} bytes exceed one binding's range on {} ({} bytes)",
                                                words * sizeof(uint32_t), context_.info().name,
                                                context_.info().max_storage_buffer_range));
  }
  const uint32_t count = static_cast<uint32_t>(words / 4);
  const uint32_t groups = std::clamp<uint32_t>((count + kWorkgroup - 1) / kWorkgroup, 1, kMaxWorkgroups);
  GpuBuffer* const buffers[] = {&data, sums_.get()};
  pipeline_->bind(buffers);
  KVS_RETURN_IF_ERROR(context_.run([&](VkCommandBuffer c) { pipeline_->record(c, &count, groups); }));
  uint32_t total = 0, part = 0;
  for (uint32_t g = 0; g < groups; ++g) {
    std::memcpy(&part, sums_->mapped().data() + g * sizeof(uint32_t), sizeof(part));
    total += part;
  }
  return total;
}

}  // namespace kvs
