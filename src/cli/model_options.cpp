#include "cli/model_options.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "gpu/gpu_model.h"
#include "parallel/mpi_communicator.h"
#include "parallel/tensor_parallel.h"

namespace kvs::cli {

std::string default_model_path() {
#ifdef KVS_DEFAULT_MODEL_PATH
  return KVS_DEFAULT_MODEL_PATH;
#else
  return "models/stories260K.gguf";
#endif
}

void add_model_options(CLI::App& command, ModelOptions& options) {
  command.add_option("-m,--model", options.model_path,
                     "GGUF model file (default: stories260K converted at build time: " + default_model_path() + ")");
  command.add_option("-t,--threads", options.threads, "Worker threads (default: all hardware threads)")
      ->check(CLI::Range(1, 256));
  add_tensor_parallel_option(command, options.tp);
  add_no_repack_flag(command, options.no_repack);
  command
      .add_option("--device", options.device,
                  "Where the model runs: cpu, or vulkan[:N] (Vulkan device N of `kvserve devices`; under --tp rank r "
                  "on vulkan:r, or every rank on vulkan:N; the Llama family, Gemma 3 and DeepSeek-V2 with every "
                  "weight type and K/V format, windows and eviction policies: docs/GPU.md)")
      ->capture_default_str();
  command.add_flag("--profile", options.profile,
                   "With --device vulkan: time every shader on the device (timestamps) and print the time per shader "
                   "kind to stderr at the end (serve: when it stops)");
}

void add_tensor_parallel_option(CLI::App& command, size_t& tp) {
  command
      .add_option("--tp", tp,
                  "Tensor parallelism: split the model's heads, KV heads and FFN over N ranks, each holding 1/N of "
                  "the weights and the KV cache (under mpirun -np N: the MPI ranks; otherwise N ranks on threads of "
                  "this process, sharing --threads)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

void add_no_repack_flag(CLI::App& command, bool& no_repack) {
  command.add_flag("--no-repack", no_repack,
                   "Keep quantized, F16 and BF16 matrices in the file's layout instead of repacking them at load "
                   "for the packed int8 and float panel kernels (same values; for A/B measurements)");
}

std::optional<size_t> vulkan_device(const std::string& device) {
  if (device == "cpu") return std::nullopt;
  if (device == "vulkan") return 0;
  if (device.rfind("vulkan:", 0) == 0 && device.size() > 7 &&
      device.find_first_not_of("0123456789", 7) == std::string::npos) {
    return std::stoul(device.substr(7));
  }
  throw CommandError(fmt::format("--device must be cpu, vulkan or vulkan:N, got '{}'", device));
}

LoadedModel load_model(const ModelOptions& options) {
  const std::string path = options.model_path.empty() ? default_model_path() : options.model_path;
  const std::optional<size_t> gpu = vulkan_device(options.device);
  // Under --tp, rank r runs on vulkan:r, or every rank on vulkan:N when a device is named.
  const auto device_of_rank = [&](size_t rank) { return options.device == "vulkan" ? rank : *gpu; };
  const auto on_device = [&](const DecoderModel& model, size_t rank) -> Expected<std::unique_ptr<Model>> {
    auto made = make_gpu_model(model, device_of_rank(rank), {.profile = options.profile});
    if (!made) {
      return made.status().with_context(
          fmt::format("--device {}{}", options.device, options.tp > 1 ? fmt::format(" (rank {})", rank) : ""));
    }
    return made;
  };
  if (options.profile && !gpu) throw CommandError("--profile times the GPU's shaders: it needs --device vulkan[:N]");
  // The GPU reads the matrices in the file's layout.
  const WeightPacking packing = options.no_repack || gpu ? WeightPacking::kNone : WeightPacking::kForCpu;
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  LoadedModel loaded;
  Communicator* comm = nullptr;
  // Under mpirun the ranks on one machine share it: each takes its share of the hardware threads by default.
  size_t threads = options.threads     ? options.threads
                   : launched_by_mpi() ? std::max<size_t>(1, hardware / std::max<size_t>(1, options.tp))
                                       : hardware;
  if (options.tp > 1) {
    auto ranks = TensorParallelRanks::launch(
        path, packing, options.tp, threads,
        gpu ? TensorParallelRanks::ShardModel(on_device) : TensorParallelRanks::ShardModel());
    if (!ranks) throw CommandError(ranks.status().message());
    loaded.tp = std::move(ranks).value();
    comm = &loaded.tp->communicator();
  }
  const auto start = std::chrono::steady_clock::now();
  auto model = DecoderModel::load(path, packing, comm);
  if (!model && loaded.tp && loaded.tp->mpi()) mpi_abort_job(model.status().message());  // the others wait for it
  if (!model) throw CommandError(model.status().message());
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  if (!tokenizer) throw CommandError(fmt::format("{}: {}", path, tokenizer.status().message()));
  loaded.model = std::move(model).value();
  loaded.tokenizer = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  if (gpu) {
    const size_t rank = comm != nullptr ? comm->rank() : 0;
    auto model_on_device = on_device(*loaded.model, rank);
    if (!model_on_device && loaded.tp && loaded.tp->mpi()) mpi_abort_job(model_on_device.status().message());
    if (!model_on_device) throw CommandError(model_on_device.status().message());
    loaded.gpu = std::move(model_on_device).value();
  }
  loaded.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  loaded.pool = std::make_unique<ThreadPool>(threads);
  return loaded;
}

bool serve_unless_root(LoadedModel& loaded) {
  if (!loaded.tp || loaded.tp->is_root()) return false;
  // An MPI rank above 0: serve rank 0's engines with this process's shard until rank 0 is done.
  const Status s = run_tensor_parallel_worker(loaded.engine_model(), *loaded.pool, *loaded.model->communicator());
  if (!s) throw CommandError(s.message());
  return true;
}

void print_gpu_memory_line(const LoadedModel& loaded, const Engine& engine, const EngineConfig& config) {
  if (!loaded.gpu) return;
  auto report = gpu_memory_report(*loaded.gpu, engine_kv_spec(*loaded.gpu, config), config.max_batch_tokens);
  if (!report) return;
  const std::string line =
      gpu_memory_line(*loaded.gpu, *report, engine.kv().usage().blocks_total, config.kv.block_size);
  std::fprintf(stderr, "kvserve: %s\n", line.c_str());
}

void print_gpu_profile(const LoadedModel& loaded) {
  if (!loaded.gpu) return;
  uint64_t steps = 0;
  const std::vector<GpuKernelTime> kinds = gpu_profile(*loaded.gpu, &steps);
  if (kinds.empty()) return;
  double total = 0.0;
  for (const GpuKernelTime& k : kinds) total += k.seconds;
  std::string table =
      fmt::format("kvserve: --profile, {} steps on the device, {:.3f} ms in all:\n", steps, 1e3 * total);
  for (const GpuKernelTime& k : kinds) {
    table += fmt::format("  {:<16} {:>10.3f} ms {:>6.1f}%  {:>8} dispatches, {:.1f} us each\n", k.kind, 1e3 * k.seconds,
                         100.0 * k.seconds / std::max(total, 1e-12), k.dispatches,
                         1e6 * k.seconds / std::max<double>(1.0, static_cast<double>(k.dispatches)));
  }
  std::fputs(table.c_str(), stderr);
}

}  // namespace kvs::cli
