#include "gpu/gpu_recorder.h"

#include <algorithm>

namespace kvs {
namespace {

constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kBindingsPerSet = 9;  // the most any shader has (paged attention: 9)
constexpr uint32_t kFirstQueryCapacity = 4096;

// Every write of the earlier dispatches and copies, visible to `to_access` at `to_stage`.
void barrier(VkCommandBuffer commands, VkPipelineStageFlags to_stage, VkAccessFlags to_access) {
  record_memory_barrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                        VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, to_stage, to_access);
}

}  // namespace

Expected<std::unique_ptr<GpuRecorder>> GpuRecorder::create(VulkanContext& context) {
  std::unique_ptr<GpuRecorder> r(new GpuRecorder(context));
  const VkCommandPoolCreateInfo pool_info{.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                          .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                          .queueFamilyIndex = context.queue_family()};
  KVS_RETURN_IF_ERROR(
      vk_check(vkCreateCommandPool(context.device(), &pool_info, nullptr, &r->command_pool_), "vkCreateCommandPool"));
  const VkCommandBufferAllocateInfo allocate{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                             .commandPool = r->command_pool_,
                                             .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                             .commandBufferCount = 1};
  KVS_RETURN_IF_ERROR(
      vk_check(vkAllocateCommandBuffers(context.device(), &allocate, &r->commands_), "vkAllocateCommandBuffers"));
  return r;
}

GpuRecorder::~GpuRecorder() {
  const VkDevice device = context_.device();
  for (VkDescriptorPool p : set_pools_) vkDestroyDescriptorPool(device, p, nullptr);
  if (queries_ != VK_NULL_HANDLE) vkDestroyQueryPool(device, queries_, nullptr);
  if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device, command_pool_, nullptr);
}

Status GpuRecorder::set_profile(GpuProfile* sink) {
  const bool on = sink != nullptr;
  if (on && context_.timestamp_bits() == 0) {
    return Status::unimplemented(
        fmt::format("--profile: the compute queue of {} writes no timestamps", context_.info().name));
  }
  if (on) KVS_RETURN_IF_ERROR(ensure_queries(kFirstQueryCapacity));
  profiling_ = on;
  profile_ = sink;
  return Status::ok();
}

Status GpuRecorder::ensure_queries(uint32_t count) {
  if (count <= query_capacity_) return Status::ok();
  if (queries_ != VK_NULL_HANDLE) vkDestroyQueryPool(context_.device(), queries_, nullptr);
  queries_ = VK_NULL_HANDLE;
  query_capacity_ = 0;
  const VkQueryPoolCreateInfo info{
      .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = count};
  KVS_RETURN_IF_ERROR(vk_check(vkCreateQueryPool(context_.device(), &info, nullptr, &queries_), "vkCreateQueryPool"));
  query_capacity_ = count;
  return Status::ok();
}

Status GpuRecorder::begin() {
  KVS_ASSERT(!open_, "GpuRecorder::begin with a step open");
  for (VkDescriptorPool p : set_pools_) vkResetDescriptorPool(context_.device(), p, 0);
  current_pool_ = 0;
  sets_in_pool_ = 0;
  KVS_RETURN_IF_ERROR(vk_check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer"));
  const VkCommandBufferBeginInfo info{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  KVS_RETURN_IF_ERROR(vk_check(vkBeginCommandBuffer(commands_, &info), "vkBeginCommandBuffer"));
  open_ = true;
  any_work_ = false;
  kinds_.clear();
  if (profiling_) {
    vkCmdResetQueryPool(commands_, queries_, 0, query_capacity_);
    vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
  }
  return Status::ok();
}

Expected<VkDescriptorSet> GpuRecorder::allocate_set(const ComputePipeline& pipeline) {
  if (sets_in_pool_ == kSetsPerPool) {  // this one is full: the next, kept from an earlier step or made now
    ++current_pool_;
    sets_in_pool_ = 0;
  }
  if (current_pool_ == set_pools_.size()) {
    const VkDescriptorPoolSize size{.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                    .descriptorCount = kSetsPerPool * kBindingsPerSet};
    const VkDescriptorPoolCreateInfo info{.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                          .maxSets = kSetsPerPool,
                                          .poolSizeCount = 1,
                                          .pPoolSizes = &size};
    VkDescriptorPool pool = VK_NULL_HANDLE;
    KVS_RETURN_IF_ERROR(
        vk_check(vkCreateDescriptorPool(context_.device(), &info, nullptr, &pool), "vkCreateDescriptorPool"));
    set_pools_.push_back(pool);
  }
  const VkDescriptorSetLayout layout = pipeline.set_layout();
  const VkDescriptorSetAllocateInfo info{.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                         .descriptorPool = set_pools_[current_pool_],
                                         .descriptorSetCount = 1,
                                         .pSetLayouts = &layout};
  VkDescriptorSet set = VK_NULL_HANDLE;
  KVS_RETURN_IF_ERROR(vk_check(vkAllocateDescriptorSets(context_.device(), &info, &set), "vkAllocateDescriptorSets"));
  ++sets_in_pool_;
  return set;
}

Status GpuRecorder::dispatch(const ComputePipeline& pipeline, std::span<GpuBuffer* const> buffers, const void* push,
                             uint32_t groups_x, uint32_t groups_y, const char* kind) {
  KVS_ASSERT(open_, "GpuRecorder::dispatch outside a step");
  KVS_ASSERT(pipeline.bindings() <= kBindingsPerSet, "a pipeline of {} bindings", pipeline.bindings());
  auto set = allocate_set(pipeline);
  if (!set) return set.status();
  pipeline.write(*set, buffers);
  if (any_work_) {
    barrier(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  any_work_ = true;
  pipeline.record(commands_, *set, push, groups_x, groups_y);
  if (profiling_) {
    kinds_.push_back(kind);
    if (kinds_.size() < query_capacity_) {
      vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                          static_cast<uint32_t>(kinds_.size()));
    }
  }
  return Status::ok();
}

Status GpuRecorder::copy(GpuBuffer& from, GpuBuffer& to, std::span<const VkBufferCopy> regions) {
  KVS_ASSERT(open_, "GpuRecorder::copy outside a step");
  if (regions.empty()) return Status::ok();
  if (any_work_)
    barrier(commands_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  any_work_ = true;
  vkCmdCopyBuffer(commands_, from.handle(), to.handle(), static_cast<uint32_t>(regions.size()), regions.data());
  return Status::ok();
}

void GpuRecorder::abandon() {
  if (!open_) return;
  open_ = false;
  vkEndCommandBuffer(commands_);
}

Status GpuRecorder::submit() {
  KVS_ASSERT(open_, "GpuRecorder::submit without a step");
  open_ = false;
  // The host reads what the shaders wrote (logits, the KV pools in mapped memory) once the fence signals.
  barrier(commands_, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  KVS_RETURN_IF_ERROR(vk_check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer"));
  KVS_RETURN_IF_ERROR(context_.submit_and_wait(commands_));
  if (!profiling_ || kinds_.empty()) return Status::ok();
  profile_->add_step();
  const uint32_t stamped = std::min<uint32_t>(static_cast<uint32_t>(kinds_.size()) + 1, query_capacity_);
  std::vector<uint64_t> ticks(stamped);
  KVS_RETURN_IF_ERROR(
      vk_check(vkGetQueryPoolResults(context_.device(), queries_, 0, stamped, ticks.size() * sizeof(uint64_t),
                                     ticks.data(), sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
               "vkGetQueryPoolResults"));
  const uint64_t mask = context_.timestamp_bits() >= 64 ? ~uint64_t{0} : (uint64_t{1} << context_.timestamp_bits()) - 1;
  for (uint32_t i = 1; i < stamped; ++i) {
    profile_->add(kinds_[i - 1],
                  static_cast<double>((ticks[i] - ticks[i - 1]) & mask) * context_.timestamp_period() * 1e-9);
  }
  if (kinds_.size() + 1 > query_capacity_) return ensure_queries(2 * static_cast<uint32_t>(kinds_.size() + 1));
  return Status::ok();
}

}  // namespace kvs
