// kvserve devices: what kvserve can run on here, the CPU and every Vulkan device with the facts it goes by (memory,
// the range one storage binding may span, subgroup size, the shader features it uses).
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "gpu/gpu_devices.h"
#include "tensor/cpu_features.h"
#include "tensor/isa.h"
#include "tensor/latent_partial.h"

namespace kvs::cli {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

std::string gib(uint64_t bytes) { return fmt::format("{:.1f} GiB", double(bytes) / double(1ull << 30)); }

std::string mib(uint64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

void run(bool json) {
  const std::string isa(isa_name(best_isa()));
  std::string extras;
  if (cpu_has_avx512_vnni()) extras += " VNNI";
  if (cpu_has_avx512_bf16()) extras += " BF16";
  if (amx_bf16_usable()) extras += " AMX-BF16";
  const unsigned threads = std::thread::hardware_concurrency();
  const auto devices = list_gpu_devices();
  if (json) {
    nlohmann::json out{{"cpu", {{"name", cpu_model_name()}, {"threads", threads}, {"isa", isa}}}};
    out["vulkan_built"] = vulkan_built();
    out["vulkan"] = nlohmann::json::array();
    if (!devices) out["vulkan_error"] = devices.status().message();
    for (const GpuDeviceInfo& d : devices ? *devices : std::vector<GpuDeviceInfo>{}) {
      out["vulkan"].push_back({{"index", d.index},
                               {"name", d.name},
                               {"type", d.type},
                               {"api", d.api},
                               {"driver", d.driver},
                               {"device_local_bytes", d.device_local_bytes},
                               {"max_storage_buffer_range", d.max_storage_buffer_range},
                               {"subgroup_size", d.subgroup_size},
                               {"max_workgroup_invocations", d.max_workgroup_invocations},
                               {"shader_float16", d.shader_float16},
                               {"shader_int8", d.shader_int8},
                               {"storage_16bit", d.storage_16bit},
                               {"storage_8bit", d.storage_8bit},
                               {"cooperative_matrix", d.cooperative_matrix},
                               {"timestamps", d.timestamps}});
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  fmt::print("cpu       {}: {} threads, kernels {}{}\n", cpu_model_name(), threads, isa, extras);
  if (!devices) {
    fmt::print("vulkan    none: {}\n", devices.status().message());
    return;
  }
  if (devices->empty()) fmt::print("vulkan    none: the Vulkan loader found no device\n");
  for (const GpuDeviceInfo& d : *devices) {
    fmt::print(
        "vulkan:{}  {} ({}, Vulkan {}, {}): {} device-local, bindings up to {}, subgroup {}, workgroups up to {}; "
        "fp16 {}, int8 {}, 16-bit storage {}, 8-bit storage {}, cooperative matrix {}, timestamps {}\n",
        d.index, d.name, d.type, d.api, d.driver, gib(d.device_local_bytes), mib(d.max_storage_buffer_range),
        d.subgroup_size, d.max_workgroup_invocations, yes_no(d.shader_float16), yes_no(d.shader_int8),
        yes_no(d.storage_16bit), yes_no(d.storage_8bit), yes_no(d.cooperative_matrix), yes_no(d.timestamps));
  }
}

}  // namespace

void register_devices(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List what kvserve can run on: the CPU and every Vulkan device (memory, binding range, subgroup "
      "size, shader features)");
  cmd->add_flag("--json", *json, "One JSON object instead of the lines");
  cmd->callback([json] { run(*json); });
}

}  // namespace kvs::cli
