#include "gpu/gpu_decoder_model.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "gpu/gpu_decoder_runner.h"
#include "gpu/vulkan_kv_executor.h"

namespace kvs {
namespace {

// A device-local copy of `bytes`.
Expected<std::unique_ptr<GpuBuffer>> upload(VulkanContext& context, std::span<const std::byte> bytes) {
  auto buffer = GpuBuffer::create(context, bytes.size(), GpuMemory::kDeviceLocal);
  if (!buffer) return buffer.status();
  KVS_RETURN_IF_ERROR((*buffer)->upload(bytes));
  return buffer;
}

}  // namespace

size_t GpuDecoderModel::binding_range() const {
  const uint64_t device = context_->info().max_storage_buffer_range;
  return options_.max_binding_bytes > 0 ? std::min<uint64_t>(options_.max_binding_bytes, device) : device;
}

// `view` on the device in its file's type, or why not (named `what`).
Expected<GpuMatrix> GpuDecoderModel::upload_matrix(const WeightView& view, const std::string& what) {
  VulkanContext& context = *context_;
  if (view.layout != WeightLayout::kRows) {
    return Status::invalid_argument(
        fmt::format("{} is repacked for the CPU ({}): load the model with "
                    "WeightPacking::kNone for the GPU",
                    what, weight_layout_name(view.layout)));
  }
  const size_t row_bytes = view.row_bytes(), range = binding_range();
  if (row_bytes > range) {
    return Status::unimplemented(fmt::format("{}: one row of {} bytes exceeds one storage binding of {} ({} bytes)",
                                             what, row_bytes, context.info().name, range));
  }
  GpuMatrix m{.type = view.type, .rows = static_cast<uint32_t>(view.rows), .cols = static_cast<uint32_t>(view.cols)};
  const size_t rows_per_part = range / row_bytes;
  for (size_t first = 0; first < view.rows; first += rows_per_part) {
    const size_t rows = std::min(rows_per_part, view.rows - first);
    auto buffer = upload(context, std::span(view.data + first * row_bytes, rows * row_bytes));
    if (!buffer) return buffer.status().with_context(what);
    m.parts.push_back(
        {.buffer = std::move(*buffer), .first_row = static_cast<uint32_t>(first), .rows = static_cast<uint32_t>(rows)});
    weight_bytes_ += rows * row_bytes;
  }
  return m;
}

Expected<GpuExperts> GpuDecoderModel::upload_experts(std::span<const WeightView> experts, const std::string& what) {
  GpuExperts e;
  if (experts.empty()) return e;
  const WeightView& first = experts[0];
  e.type = first.type;
  e.rows = static_cast<uint32_t>(first.rows);
  e.cols = static_cast<uint32_t>(first.cols);
  const size_t expert_bytes = first.rows * first.row_bytes(), range = binding_range();
  if (expert_bytes > range) {
    return Status::unimplemented(fmt::format("{}: one expert of {} bytes exceeds one storage binding of {} ({} bytes)",
                                             what, expert_bytes, context_->info().name, range));
  }
  const size_t per_part = range / expert_bytes;
  for (size_t begin = 0; begin < experts.size(); begin += per_part) {
    const size_t count = std::min(per_part, experts.size() - begin);
    std::vector<std::byte> stacked(count * expert_bytes);
    for (size_t i = 0; i < count; ++i) {
      const WeightView& v = experts[begin + i];
      if (v.layout != WeightLayout::kRows || v.type != e.type || v.rows != first.rows || v.cols != first.cols) {
        return Status::invalid_argument(fmt::format("{}: expert {} is not shaped as expert 0", what, begin + i));
      }
      std::memcpy(&stacked[i * expert_bytes], v.data, expert_bytes);
    }
    auto buffer = upload(*context_, stacked);
    if (!buffer) return buffer.status().with_context(what);
    e.parts.push_back({.buffer = std::move(*buffer),
                       .first_expert = static_cast<uint32_t>(begin),
                       .experts = static_cast<uint32_t>(count)});
    weight_bytes_ += stacked.size();
  }
  return e;
}

Status GpuDecoderModel::upload_mla(const DecoderLayerWeights& from, GpuLayerWeights& to, size_t layer) {
  const ModelConfig& c = shard_config();
  const MlaLayerWeights& m = from.mla;
  const auto matrix = [&](const WeightView& view, const std::string& name, GpuMatrix& into) -> Status {
    if (!view.data) return Status::ok();
    auto uploaded = upload_matrix(view, fmt::format("blk.{}.{}", layer, name));
    if (!uploaded) return uploaded.status();
    into = std::move(*uploaded);
    return Status::ok();
  };
  KVS_RETURN_IF_ERROR(matrix(m.q_a, "attn_q_a", to.q_a));
  KVS_RETURN_IF_ERROR(matrix(m.q_b, "attn_q_b", to.q_b));
  KVS_RETURN_IF_ERROR(matrix(m.kv_a, "attn_kv_a_mqa", to.kv_a));
  KVS_RETURN_IF_ERROR(matrix(m.kv_b, "attn_kv_b", to.kv_b));
  for (const auto& [into, values] : {std::pair{&to.q_a_norm, &m.q_a_norm}, std::pair{&to.kv_a_norm, &m.kv_a_norm}}) {
    if (values->empty()) continue;
    auto b = upload_vector(*values);
    if (!b) return b.status();
    *into = std::move(*b);
  }
  if (!m.k_b_packed.empty() || !m.v_b_packed.empty()) {
    return Status::invalid_argument("MLA heads packed for the CPU: load the model with WeightPacking::kNone");
  }
  for (size_t h = 0; h < c.num_heads; ++h) {
    to.k_b.emplace_back();
    to.v_b.emplace_back();
    KVS_RETURN_IF_ERROR(matrix(m.k_b_head(h, c.mla.kv_lora_rank), fmt::format("attn_k_b head {}", h), to.k_b.back()));
    KVS_RETURN_IF_ERROR(matrix(m.v_b_head(h, c.mla.value_dim), fmt::format("attn_v_b head {}", h), to.v_b.back()));
  }
  if (!c.moe.is_moe_layer(layer)) return Status::ok();
  const MoeLayerWeights& moe = from.moe;
  KVS_RETURN_IF_ERROR(matrix(moe.router, "ffn_gate_inp", to.router));
  KVS_RETURN_IF_ERROR(matrix(moe.shared_gate, "ffn_gate_shexp", to.shared_gate));
  KVS_RETURN_IF_ERROR(matrix(moe.shared_up, "ffn_up_shexp", to.shared_up));
  KVS_RETURN_IF_ERROR(matrix(moe.shared_down, "ffn_down_shexp", to.shared_down));
  for (const auto& [into, views, name] :
       {std::tuple{&to.gate_exps, &moe.gate, "ffn_gate_exps"}, std::tuple{&to.up_exps, &moe.up, "ffn_up_exps"},
        std::tuple{&to.down_exps, &moe.down, "ffn_down_exps"}}) {
    auto experts = upload_experts(*views, fmt::format("blk.{}.{}", layer, name));
    if (!experts) return experts.status();
    *into = std::move(*experts);
  }
  return Status::ok();
}

Expected<std::unique_ptr<GpuBuffer>> GpuDecoderModel::upload_vector(std::span<const float> values) {
  weight_bytes_ += values.size_bytes();
  return upload(*context_, std::as_bytes(values));
}

namespace {

// What the GPU forward does not compute yet, named; ok when it computes `c`.
Status check_supported(const DecoderModel& model) {
  const ModelConfig& c = model.config();
  if (c.architecture != "llama" && c.architecture != "qwen2" && !c.is_gemma3() && c.architecture != "deepseek2") {
    return Status::unimplemented(fmt::format(
        "architecture '{}' on --device vulkan: the GPU runs llama, qwen2, gemma3 and deepseek2", c.architecture));
  }
  if (c.moe.num_experts > 0 && c.architecture != "deepseek2") {
    return Status::unimplemented(fmt::format("a mixture of experts in a '{}' file on --device vulkan", c.architecture));
  }
  if (c.is_mla()) {
    if (2 * c.rope_frequencies().size() != c.rope_dim) {
      return Status::unimplemented(fmt::format("MLA's RoPE over {} of its {} dimensions on --device vulkan",
                                               2 * c.rope_frequencies().size(), c.rope_dim));
    }
  } else if (2 * c.rope_frequencies().size() != c.head_dim) {
    return Status::unimplemented(fmt::format("RoPE over {} of a head's {} dimensions on --device vulkan",
                                             2 * c.rope_frequencies().size(), c.head_dim));
  }
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<GpuDecoderModel>> GpuDecoderModel::create(const DecoderModel& host, size_t device,
                                                                   GpuModelOptions options) {
  KVS_RETURN_IF_ERROR(check_supported(host));
  std::unique_ptr<GpuDecoderModel> model(new GpuDecoderModel(host, device, options));
  auto context = VulkanContext::create(device);
  if (!context) return context.status();
  model->context_ = std::move(*context);
  VulkanContext& ctx = *model->context_;
  auto ops = GpuOps::create(ctx);
  if (!ops) return ops.status();
  model->ops_ = std::move(*ops);
  model->allocator_ = std::make_unique<VulkanKvAllocator>(ctx);
  model->host_tier_allocator_ = std::make_unique<VulkanKvAllocator>(ctx, GpuMemory::kHostCached);
  const DecoderWeights& w = host.weights();
  const ModelConfig& c = host.config();
  auto embedding = model->upload_matrix(w.token_embedding, "token_embd");
  if (!embedding) return embedding.status();
  model->embedding_ = std::move(*embedding);
  if (!model->output_is_embedding()) {
    auto output = model->upload_matrix(w.output, "output");
    if (!output) return output.status();
    model->output_ = std::move(*output);
  }
  auto output_norm = model->upload_vector(w.output_norm);
  if (!output_norm) return output_norm.status();
  model->output_norm_ = std::move(*output_norm);
  for (size_t l = 0; l < c.num_layers; ++l) {
    const DecoderLayerWeights& lw = w.layers[l];
    GpuLayerWeights g;
    const std::pair<GpuMatrix*, const WeightView*> matrices[] = {
        {&g.wq, &lw.wq},         {&g.wk, &lw.wk},     {&g.wv, &lw.wv},        {&g.wo, &lw.wo},
        {&g.w_gate, &lw.w_gate}, {&g.w_up, &lw.w_up}, {&g.w_down, &lw.w_down}};
    const char* names[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (size_t i = 0; i < std::size(matrices); ++i) {
      if (!matrices[i].second->data) continue;  // none in this layer (DeepSeek-V2's K/V, an MoE layer's dense FFN)
      auto m = model->upload_matrix(*matrices[i].second, fmt::format("blk.{}.{}", l, names[i]));
      if (!m) return m.status();
      *matrices[i].first = std::move(*m);
    }
    const std::pair<std::unique_ptr<GpuBuffer>*, const std::vector<float>*> vectors[] = {
        {&g.attn_norm, &lw.attn_norm},
        {&g.ffn_norm, &lw.ffn_norm},
        {&g.bq, &lw.bq},
        {&g.bk, &lw.bk},
        {&g.bv, &lw.bv},
        {&g.q_norm, &lw.q_norm},
        {&g.k_norm, &lw.k_norm},
        {&g.post_attention_norm, &lw.post_attention_norm},
        {&g.post_ffw_norm, &lw.post_ffw_norm}};
    for (const auto& [to, from] : vectors) {
      if (from->empty()) continue;
      auto b = model->upload_vector(*from);
      if (!b) return b.status();
      *to = std::move(*b);
    }
    if (c.is_mla()) KVS_RETURN_IF_ERROR(model->upload_mla(lw, g, l));
    model->layers_.push_back(std::move(g));
  }
  return model;
}

std::unique_ptr<KvExecutor> GpuDecoderModel::make_kv_executor(std::span<KvStorage> storages,
                                                              std::unique_ptr<KvExecutor> host) const {
  const ModelConfig& c = config();
  const KvHeadShare share{.num_layers = c.num_layers,
                          .model_kv_heads = c.num_kv_heads,
                          .first = first_kv_head(),
                          .count = kv_spec({}, 1).num_kv_heads};
  return std::make_unique<VulkanKvExecutor>(
      *context_, *allocator_, *host_tier_allocator_, storages, std::move(host),
      KeyRotation{.inv_freq = c.rope_frequencies(), .neox = c.rope_style == RopeStyle::kNeox}, share);
}

std::unique_ptr<ModelRunner> GpuDecoderModel::make_runner(ThreadPool&, MlaForm mla_form) const {
  return std::make_unique<GpuDecoderRunner>(*this, mla_form);
}

Expected<std::unique_ptr<Model>> make_gpu_model(const DecoderModel& model, size_t device, GpuModelOptions options) {
  auto gpu = GpuDecoderModel::create(model, device, options);
  if (!gpu) return gpu.status();
  return std::unique_ptr<Model>(std::move(*gpu));
}

}  // namespace kvs
