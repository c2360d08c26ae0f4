// `kvserve bench`: prefill and decode throughput, the memory roofline, KV cache vs recompute and
// paged vs contiguous KV on one model, as a Markdown table (stdout), JSON (--json) and SVG (--plot).
// Progress goes to stderr. The default model is a synthetic TinyLlama-1.1B-shaped Q8_0 file,
// written once next to the binary.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "bench/bench_kv_types.h"
#include "bench/bench_report.h"
#include "bench/bench_run.h"
#include "bench/bench_svg.h"
#include "cli/bench_gpu.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "gpu/gpu_model.h"
#include "model/synth.h"

namespace kvs::cli {
namespace {

// The default model's context: the TinyLlama shape says 2048, but decoding 128 tokens at depth
// 2048 needs more; the weights (random) do not depend on it.
constexpr uint32_t kBenchContext = 4096;

struct BenchOptions {
  std::string model_path;     // empty: the synthetic 1b Q8_0 model
  std::string prefill_model;  // empty: the BF16 twin with the default model (not --quick); "none": skip
  std::string model_dir;      // where default models are cached; empty: <binary dir>/models
  size_t threads = 0;
  size_t tp = 1;  // --tp: ranks the model is split over (cli/model_options.h)
  size_t reps = 3;
  bool quick = false;
  bool weights_only = false;
  bool no_repack = false;
  std::string json_path;
  std::string plot_path;
  std::vector<std::string> kv_types;  // --kv-types: only the KV type section
  std::vector<size_t> kv_depths = {0, 1024, 4096};
  size_t kv_tokens = 64;
  std::string device = "cpu";  // --device vulkan[:N]: the GPU section alone (cli/bench_gpu.h)
  bool profile = false;
};

std::filesystem::path default_model_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::current_path() : exe.parent_path()) / "models";
}

// The synthetic 1b model of `type`, written (to a temporary name, then renamed) when missing.
std::string synthetic_model(const std::filesystem::path& dir, DType type) {
  const auto path = dir / fmt::format("synth-1b-{}-ctx{}.gguf", dtype_name(type), kBenchContext);
  if (std::filesystem::exists(path)) return path.string();
  SynthSpec spec = *synth_preset("1b");
  spec.type = type;
  spec.ctx = kBenchContext;
  fmt::print(stderr, "kvserve: writing the benchmark model {} (synthetic 1b, {}, context {}; once, ~15-30 s)\n",
             path.string(), dtype_name(type), kBenchContext);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw CommandError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  // A name of this process's own: the ranks of an mpirun job may all write it at once (the same bytes).
  const std::string tmp = fmt::format("{}.{}.tmp", path.string(), getpid());
  if (Status s = write_synth_model(spec, tmp); !s) throw CommandError(s.message());
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw CommandError(fmt::format("cannot rename {} to {}: {}", tmp, path.string(), ec.message()));
  return path.string();
}

// The measured model: split over --tp ranks when asked (in process, or this process's rank of an mpirun job), with
// rank 0's thread pool.
LoadedModel load_measured(const BenchOptions& o, const std::string& path) {
  return load_model(
      {.model_path = path, .threads = o.threads, .no_repack = o.no_repack, .tp = o.tp, .device = o.device});
}

std::unique_ptr<DecoderModel> load(const std::string& path, bool no_repack) {
  auto model = DecoderModel::load(path, no_repack ? WeightPacking::kNone : WeightPacking::kForCpu);
  if (!model) throw CommandError(model.status().message());
  return std::move(model).value();
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// `threads`: this process's pool; with --tp and no --threads the default (split over the ranks) is left to the rerun.
std::string reproduce_command(const BenchOptions& o, size_t threads) {
  std::string cmd = "kvserve bench";
  if (o.threads > 0 || o.tp == 1) cmd += fmt::format(" --threads {}", o.threads > 0 ? o.threads : threads);
  cmd += fmt::format(" --reps {}", o.reps);
  if (o.quick) cmd += " --quick";
  if (o.weights_only) cmd += " --weights-only";
  if (o.no_repack) cmd += " --no-repack";
  if (o.tp > 1) cmd += fmt::format(" --tp {}", o.tp);
  if (!o.model_path.empty()) cmd += " -m " + o.model_path;
  if (!o.prefill_model.empty()) cmd += " --prefill-model " + o.prefill_model;
  if (!o.model_dir.empty()) cmd += " --model-dir " + o.model_dir;
  if (!o.json_path.empty()) cmd += " --json " + o.json_path;
  if (!o.plot_path.empty()) cmd += " --plot " + o.plot_path;
  return cmd;
}

// "int8" (K and V) or "int8/int4" (K / V), then optionally "@w512" (a forced window) and "@global" (one pool
// for every layer, not the hybrid layout).
KvVariant parse_kv_types_item(const std::string& item) {
  const size_t at = item.find('@');
  const std::string type = item.substr(0, at);
  const size_t slash = type.find('/');
  const auto k = kv_dtype_from_name(type.substr(0, slash));
  const auto v = slash == std::string::npos ? k : kv_dtype_from_name(type.substr(slash + 1));
  if (!k || !v) {
    throw CommandError(fmt::format(
        "--kv-types: unknown KV type '{}' (f32, f16, bf16, int8, int4, or K/V as int8/int4; then @wN, @global)", item));
  }
  KvVariant variant{.dtype = {*k, *v}};
  for (size_t pos = at; pos != std::string::npos;) {
    const size_t next = item.find('@', pos + 1);
    const std::string suffix = item.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    if (suffix == "global") {
      variant.hybrid = false;
    } else if (const auto form = mla_form_from_name(suffix)) {
      variant.mla_form = *form;
    } else if (suffix.size() > 1 && suffix[0] == 'w' &&
               suffix.find_first_not_of("0123456789", 1) == std::string::npos) {
      variant.window = std::stoul(suffix.substr(1));
    } else {
      throw CommandError(
          fmt::format("--kv-types: unknown '@{}' in '{}' (@wN: a window of N tokens; @global; @absorbed, @expanded: "
                      "an MLA model's attention form)",
                      suffix, item));
    }
    pos = next;
  }
  return variant;
}

void run_kv_types(const BenchOptions& o, const std::string& model_path) {
  KvTypesPlan plan{.types = {}, .depths = o.kv_depths, .decode_tokens = o.kv_tokens, .reps = o.reps};
  for (const std::string& item : o.kv_types) plan.types.push_back(parse_kv_types_item(item));
  if (Status s = plan.validate(); !s) throw CommandError(s.message());
  LoadedModel loaded = load_measured(o, model_path);
  if (serve_unless_root(loaded)) return;  // an MPI rank above 0 (--tp): rank 0 runs the benchmark
  const DecoderModel& model = *loaded.model;
  ThreadPool& pool = *loaded.pool;
  const size_t threads = pool.num_threads();
  const BenchClock now = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  BenchProgress progress(stderr, isatty(fileno(stderr)) != 0, plan.depths.size() * plan.reps * plan.types.size(), now);
  BenchEnv env{.pool = pool, .now = now, .progress = progress};
  fmt::print(stderr, "kvserve bench: {} on {}, {} threads, load {}\n", utc_now(), model_path, threads, load_average());
  if (loaded.gpu) {  // on a GPU: the bandwidth the types' decode rates are to be read against
    auto probe = gpu_stream_bandwidth(*loaded.gpu, uint64_t{128} << 20, 5);
    if (!probe) throw CommandError(probe.status().message());
    fmt::print("{}: B* (stream probe, 128 MiB, best of 5) {:.1f} GB/s\n", o.device, probe->bytes_per_second() / 1e9);
  }
  auto figures = measure_kv_types(model, plan, env, loaded.gpu.get());
  progress.finish();
  if (!figures) throw CommandError(figures.status().message());
  fmt::print("{}", kv_types_table(plan, *figures));
  std::fflush(stdout);
  if (!o.json_path.empty()) write_text_file(o.json_path, kv_types_json(plan, *figures).dump(2) + "\n");
  if (!o.plot_path.empty()) write_text_file(o.plot_path, render_svg(kv_types_panels(plan, *figures)));
}

void run(const BenchOptions& o, bool reps_given) {
  const std::filesystem::path dir = o.model_dir.empty() ? default_model_dir() : std::filesystem::path(o.model_dir);
  const std::string model_path = o.model_path.empty() ? synthetic_model(dir, DType::kQ8_0) : o.model_path;
  if (o.device != "cpu" && !o.kv_types.empty()) return run_kv_types(o, model_path);
  if (o.device != "cpu") {
    return run_gpu_bench({.model_path = model_path,
                          .device = o.device,
                          .threads = o.threads,
                          .reps = o.reps,
                          .depths = o.kv_depths,
                          .decode_tokens = o.kv_tokens,
                          .profile = o.profile,
                          .json_path = o.json_path});
  }
  if (o.profile) throw CommandError("--profile times the GPU's shaders: it needs --device vulkan[:N]");
  if (!o.kv_types.empty()) return run_kv_types(o, model_path);
  std::string extra_path = o.prefill_model;
  if (o.tp > 1 && !extra_path.empty() && extra_path != "none") {
    throw CommandError(
        fmt::format("--prefill-model {} with --tp {}: only the measured model is split; measure the "
                    "second one in a run of its own",
                    extra_path, o.tp));
  }
  if (extra_path.empty() && o.model_path.empty() && !o.quick && o.tp == 1) {
    extra_path = synthetic_model(dir, DType::kBF16);
  }
  if (extra_path == "none") extra_path.clear();

  LoadedModel loaded = load_measured(o, model_path);
  if (serve_unless_root(loaded)) return;  // an MPI rank above 0 (--tp): rank 0 runs the benchmark
  const DecoderModel& model = *loaded.model;
  const std::unique_ptr<DecoderModel> extra = extra_path.empty() ? nullptr : load(extra_path, o.no_repack);
  BenchPlan plan = o.quick ? BenchPlan::quick() : BenchPlan::standard();
  if (reps_given || !o.quick) plan.reps = o.reps;
  if (o.weights_only) plan = plan.weights_only();
  FittedPlan fitted = fit_plan_to_context(plan, model.config().context_length);
  if (Status s = fitted.plan.validate(); !s) throw CommandError(s.message());

  ThreadPool& pool = *loaded.pool;
  const size_t threads = pool.num_threads();
  BenchRunInfo info{
      .date = utc_now(), .command = reproduce_command(o, threads), .load_before = load_average(), .load_after = {}};
  const BenchClock now = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  BenchProgress progress(stderr, isatty(fileno(stderr)) != 0, bench_step_count(fitted.plan, extra != nullptr), now);
  const double start = now();
  BenchEnv env{.pool = pool, .now = now, .progress = progress};
  for (const std::string& note : fitted.notes) progress.note("kvserve bench: " + note);
  auto results =
      run_bench({.model = model, .path = model_path, .prefill_extra = extra.get(), .prefill_extra_path = extra_path},
                fitted.plan, env);
  progress.finish();
  if (!results) throw CommandError(results.status().message());
  results->notes = fitted.notes;
  info.wall_seconds = now() - start;
  info.load_after = load_average();

  fmt::print("{}", bench_table(*results, info));
  std::fflush(stdout);
  if (!o.json_path.empty()) write_text_file(o.json_path, bench_json(*results, info).dump(2) + "\n");
  if (!o.plot_path.empty()) write_text_file(o.plot_path, render_svg(bench_panels(*results)));
}

}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure prefill and decode speed, the memory-bandwidth roofline, KV cache vs recompute and paged vs "
      "contiguous KV (table on stdout, progress on stderr)");
  cmd->add_option("-m,--model", o->model_path,
                  "GGUF model (default: a synthetic TinyLlama-1.1B-shaped Q8_0 model, written once to --model-dir)");
  cmd->add_option("--prefill-model", o->prefill_model,
                  "A second model whose prefill is measured too ('none' to skip; default with the default model: its "
                  "BF16 twin, for the BF16 matmul fraction of peak)");
  cmd->add_option("--model-dir", o->model_dir, "Where the default models are cached (default: <binary dir>/models)");
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all hardware threads)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--reps", o->reps, "Repetitions of every timed measurement")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick,
                "Smoke run: prompts 16/64, 16 decode tokens at depths 0/64/256, contexts 16/64, 2 reps, no BF16 "
                "prefill");
  cmd->add_flag("--weights-only", o->weights_only,
                "Only what a weight type or kernel level changes: prefill of the longest prompt (512 tokens), decode "
                "at depth 0 with the roofline, no cache-vs-recompute curve (bench/weight_types.sh)");
  add_no_repack_flag(*cmd, o->no_repack);
  add_tensor_parallel_option(*cmd, o->tp);
  cmd->add_option("--json", o->json_path, "Write every figure as JSON to this file");
  cmd->add_option(
         "--kv-types", o->kv_types,
         "Only measure decode per KV type, interleaved: e.g. f16,int8,int4,int8/int4 (K/V); the first is "
         "the baseline. A type may end in @wN (a forced window of N tokens) and @global (one pool for every "
         "layer: a sliding-window model's window layers keep the whole context), and an MLA model's may end in "
         "@absorbed or @expanded (its attention form), e.g. f16,f16@global,f16@w512 or f16@absorbed,f16@expanded")
      ->delimiter(',');
  cmd->add_option("--kv-depths", o->kv_depths, "Depths of --kv-types")->delimiter(',')->capture_default_str();
  cmd->add_option("--kv-tokens", o->kv_tokens, "Tokens decoded per repetition with --kv-types")->capture_default_str();
  cmd->add_option("--plot", o->plot_path,
                  "Write an SVG: ms/token vs context with and without the KV cache, decode "
                  "tok/s vs depth (with --kv-types: KV bytes held vs length, and decode tok/s vs depth, per type)");
  cmd->add_option("--device", o->device,
                  "cpu, or vulkan[:N]: measure the model on Vulkan device N instead (prefill, decode at --kv-depths "
                  "with --kv-tokens, each against B*, the read bandwidth a probe shader measures in the same run)")
      ->capture_default_str();
  cmd->add_flag("--profile", o->profile, "With --device vulkan: the time per shader kind over the run");
  cmd->callback([o, cmd] { run(*o, cmd->count("--reps") > 0); });
}

}  // namespace kvs::cli
