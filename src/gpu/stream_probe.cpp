#include "gpu/stream_probe.h"

#include <algorithm>
#include <chrono>
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
  auto recorder = GpuRecorder::create(context);
  if (!recorder) return recorder.status();
  probe->recorder_ = std::move(*recorder);
  if (context.timestamp_bits() > 0) KVS_RETURN_IF_ERROR(probe->recorder_->set_profile(&probe->profile_));
  return probe;
}

Expected<uint32_t> StreamProbe::sum(GpuBuffer& data, size_t words) {
  auto pass = timed_sum(data, words);
  if (!pass) return pass.status();
  return pass->sum;
}

Expected<StreamProbe::Timed> StreamProbe::timed_sum(GpuBuffer& data, size_t words) {
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
  // Only the workgroups of this pass write: the others must read zero.
  std::memset(sums_->mapped().data(), 0, sums_->mapped().size());
  const auto device_seconds = [this] {
    const std::vector<GpuKernelTime> kinds = profile_.kinds();
    return kinds.empty() ? 0.0 : kinds[0].seconds;
  };
  const double before = device_seconds();
  GpuBuffer* const buffers[] = {&data, sums_.get()};
  KVS_RETURN_IF_ERROR(recorder_->begin());
  KVS_RETURN_IF_ERROR(recorder_->dispatch(*pipeline_, buffers, &count, groups, 1, "stream_sum"));
  const auto start = std::chrono::steady_clock::now();
  KVS_RETURN_IF_ERROR(recorder_->submit());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Timed pass{.sum = 0, .seconds = context_.timestamp_bits() > 0 ? device_seconds() - before : wall};
  uint32_t part = 0;
  for (uint32_t g = 0; g < kMaxWorkgroups; ++g) {
    std::memcpy(&part, sums_->mapped().data() + g * sizeof(uint32_t), sizeof(part));
    pass.sum += part;
  }
  return pass;
}

}  // namespace kvs
