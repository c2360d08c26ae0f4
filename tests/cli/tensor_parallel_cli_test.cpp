// kvserve run|perplexity|bench --tp N: in process (threads) and under mpirun (OpenMPI, which CI installs; the test
// starts the job itself). The split model prints what the whole one prints, with half the KV cache per rank; bench
// measures rank 0's shard; mpirun with another rank count, a model that does not split, a rank whose model file is
// missing or differs, a rank killed while a request streams: every rank stops (nonzero exit, within the test's
// timeout) with a message naming the problem and the rank.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_kvserve.h"

namespace kvs::test {
namespace {

// Why a build has no mpirun for its tests: no OpenMPI (scripts/install-deps.sh installs it), or the sanitizer build.
constexpr const char* kNoMpi =
    "this build has no MPI (the sanitizer build leaves it out; the release build runs these)";

const std::vector<std::string> kRun = {"run", "-p", "Once upon a time", "-n", "24", "--temp", "0"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// `timeout 120 mpirun ... -np N kvserve args` (a hang fails the test instead of CI).
std::vector<std::string> mpirun(size_t np, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"timeout",         "120", KVS_MPIRUN,         "--allow-run-as-root",
                                   "--oversubscribe", "-np", std::to_string(np), KVS_BINARY};
  return with(argv, args);
}

// The generated text (stdout) and the KV bytes of the summary line.
std::string kv_bytes(const std::string& err) {
  const size_t at = err.find("KV cache ");
  return at == std::string::npos ? "" : err.substr(at + 9, err.find(' ', at + 9) - at - 9);
}

TEST(CliTensorParallel, InProcessRanksPrintWhatTheWholeModelPrintsWithHalfTheKvCache) {
  TempDir dir("tp-in-process");
  const auto whole = run_kvserve(kRun, dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto split = run_kvserve(with(kRun, {"--tp", "2"}), dir);
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(split.out, whole.out);
  EXPECT_EQ(std::stoul(kv_bytes(split.err)) * 2, std::stoul(kv_bytes(whole.err))) << split.err;
  EXPECT_NE(split.err.find("rank 0 of 2: query heads 0-3, KV heads 0-1"), std::string::npos) << split.err;
  const auto bad = run_kvserve(with(kRun, {"--tp", "3"}), dir);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("8 query heads do not split evenly into 3"), std::string::npos) << bad.err;
}

// calc --tp N: one rank's figures, KV heads / N each (replicated past the model's KV heads), as run allocates.
TEST(CliTensorParallel, CalcGivesOneRanksShare) {
  TempDir dir("tp-calc");
  const auto calc = [&](const std::string& tp) {
    const auto r = run_kvserve(
        {"calc", "-m", default_model_path(), "--kv-dtype", "f32", "--tokens", "64", "--tp", tp, "--json"}, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  const auto one = calc("1"), two = calc("2"), eight = calc("8");
  EXPECT_EQ(two["kv_heads"], 2);
  EXPECT_EQ(two["model_kv_heads"], 4);
  EXPECT_EQ(two["bytes_per_token"].get<double>() * 2, one["bytes_per_token"].get<double>());
  EXPECT_EQ(eight["kv_heads"], 1);
  EXPECT_EQ(eight["kv_head_replicas"], 2);
  // What run --tp 2 allocates for 64 tokens (4 blocks) is calc's per-rank blocks.
  const auto run = run_kvserve(with(kRun, {"--tp", "2", "--kv-blocks", "4"}), dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(std::stoul(kv_bytes(run.err)), two["bytes_per_block"].get<size_t>() * 4) << run.err;
  const auto bad = run_kvserve({"calc", "-m", default_model_path(), "--tp", "3"}, dir);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("4 KV heads neither split evenly into 3 ranks"), std::string::npos) << bad.err;
}

TEST(CliTensorParallel, MpirunRanksPrintWhatTheWholeModelPrints) {
  if (std::string(KVS_MPIRUN).empty()) GTEST_SKIP() << kNoMpi;
  TempDir dir("tp-mpirun");
  const auto whole = run_kvserve(kRun, dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto split = run_command(mpirun(2, with(kRun, {"--tp", "2"})), dir);
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(split.out, whole.out) << "only rank 0 prints";
  EXPECT_NE(split.err.find("(MPI)"), std::string::npos) << split.err;
  EXPECT_EQ(std::stoul(kv_bytes(split.err)) * 2, std::stoul(kv_bytes(whole.err))) << split.err;
}

// perplexity --tp 2 (in process and under mpirun): the whole model's mean nll within fp32 summation-order rounding
// (measured: equal to 7 digits); it runs one engine per chunk, each a session of the worker ranks.
TEST(CliTensorParallel, PerplexitySplitEqualsWhole) {
  TempDir dir("tp-perplexity");
  const std::vector<std::string> args = {
      "perplexity", "-f", std::string(KVS_SHARED_DIR) + "/eval/tinystories_heldout.txt", "--chunk", "128",
      "--chunks",   "3"};
  const auto nll = [](const KvserveResult& r) {
    const size_t at = r.out.find("mean nll ");
    return at == std::string::npos ? -1.0 : std::stod(r.out.substr(at + 9));
  };
  const auto whole = run_kvserve(args, dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto split = run_kvserve(with(args, {"--tp", "2"}), dir);
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_NEAR(nll(split), nll(whole), 1e-5) << split.out;
  if (std::string(KVS_MPIRUN).empty()) return;
  const auto mpi = run_command(mpirun(2, with(args, {"--tp", "2"})), dir);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  EXPECT_NEAR(nll(mpi), nll(whole), 1e-5) << mpi.out;
}

// --tp 2 --device vulkan:0: both ranks on the one device (lavapipe here), in process and under mpirun, each a GPU
// model of its shard whose partial sums meet through host memory: the whole CPU model's story, half its KV cache a
// rank, the CPU's perplexity --tp 2 within 1e-4 of it, and H2O and sinks over a stream of 640 tokens (per-head
// compactions narrowed to each rank's heads, the attention mass of both ranks' heads summed) print the CPU's table.
// With one device, --device vulkan (rank r on vulkan:r) names the rank whose device is missing.
TEST(CliTensorParallel, OnTheGpuRanksPrintWhatTheCpuPrints) {
  TempDir dir("tp-gpu");
  const size_t devices = vulkan_devices(dir);
  if (devices == 0) GTEST_SKIP() << "no Vulkan device";
  const auto whole = run_kvserve(kRun, dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const std::vector<std::string> on_gpu = {"--tp", "2", "--device", "vulkan:0"};
  const auto split = run_kvserve(with(kRun, on_gpu), dir);
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(split.out, whole.out);
  EXPECT_NE(split.err.find("on vulkan:0"), std::string::npos) << split.err;
  EXPECT_EQ(std::stoul(kv_bytes(split.err)) * 2, std::stoul(kv_bytes(whole.err))) << split.err;
  const std::vector<std::string> ppl = {
      "perplexity", "-f",   std::string(KVS_SHARED_DIR) + "/eval/tinystories_valid_head.txt",
      "--chunk",    "128",  "--chunks",
      "3",          "--tp", "2"};
  const auto value = [](const KvserveResult& r) {
    const size_t at = r.out.rfind("perplexity ");
    return at == std::string::npos ? -1.0 : std::stod(r.out.substr(at + 11));
  };
  const auto cpu = run_kvserve(ppl, dir), gpu = run_kvserve(with(ppl, {"--device", "vulkan:0"}), dir);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_NEAR(value(gpu), value(cpu), 1e-4 * value(cpu)) << gpu.out;
  const std::vector<std::string> stream = {
      "perplexity", "-f",         std::string(KVS_SHARED_DIR) + "/eval/tinystories_valid_head.txt",
      "--stream",   "640",        "--tp",
      "2",          "--policies", "h2o,sinks",
      "--budgets",  "128"};
  const auto table = [](const std::string& out) { return out.substr(out.find("| policy")); };
  const auto cpu_stream = run_kvserve(stream, dir),
             gpu_stream = run_kvserve(with(stream, {"--device", "vulkan:0"}), dir);
  ASSERT_EQ(gpu_stream.exit_code, 0) << gpu_stream.err;
  ASSERT_NE(cpu_stream.out.find("| policy"), std::string::npos) << cpu_stream.out;
  EXPECT_EQ(table(gpu_stream.out), table(cpu_stream.out));
  if (devices == 1) {
    const auto missing = run_kvserve(with(kRun, {"--tp", "2", "--device", "vulkan"}), dir);
    EXPECT_NE(missing.exit_code, 0);
    EXPECT_NE(missing.err.find("--device vulkan (rank 1): no Vulkan device 1"), std::string::npos) << missing.err;
  }
  if (std::string(KVS_MPIRUN).empty()) return;
  const auto mpi = run_command(mpirun(2, with(kRun, on_gpu)), dir);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  EXPECT_EQ(mpi.out, whole.out) << "only rank 0 prints";
  EXPECT_NE(mpi.err.find("(MPI)"), std::string::npos) << mpi.err;
}

TEST(CliTensorParallel, MpirunFailuresStopEveryRankAndNameTheRank) {
  if (std::string(KVS_MPIRUN).empty()) GTEST_SKIP() << kNoMpi;
  TempDir dir("tp-mpirun-failures");
  const auto count = run_command(mpirun(2, with(kRun, {"--tp", "4"})), dir);
  EXPECT_NE(count.exit_code, 0);
  EXPECT_NE(count.err.find("--tp 4 but mpirun started 2 ranks"), std::string::npos) << count.err;
  // MPMD: rank 1 names a file that is not there, then a file of the same shape and other weights.
  const std::string synth = dir.file("same-shape.gguf");
  ASSERT_EQ(run_kvserve({"synth", "--layers", "5", "--dim", "64", "--heads", "8", "--kv-heads", "4", "--ffn", "172",
                         "--vocab", "512", "-o", synth},
                        dir)
                .exit_code,
            0);
  for (const auto& [model, says] : std::vector<std::pair<std::string, std::string>>{
           {dir.file("missing.gguf"), "rank 1: file"}, {synth, "rank 1's model file differs from rank 0's"}}) {
    std::vector<std::string> argv = mpirun(1, with(kRun, {"--tp", "2"}));
    argv.push_back(":");
    argv.insert(argv.end(), {"-np", "1", KVS_BINARY});
    argv = with(argv, with(kRun, {"--tp", "2", "-m", model}));
    const auto r = run_command(argv, dir);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.exit_code, 124) << "timed out: a rank waited for ever";
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
}

// bench --tp 2: the benchmark of rank 0's shard (half the KV bytes per token of the whole model: calc --tp 2's), its
// engines (several open at once: paged and contiguous interleaved) served by the other rank.
TEST(CliTensorParallel, BenchMeasuresRankZerosShard) {
  TempDir dir("tp-bench");
  const auto calc = run_kvserve(
      {"calc", "-m", default_model_path(), "--kv-dtype", "f32", "--tokens", "64", "--tp", "2", "--json"}, dir);
  ASSERT_EQ(calc.exit_code, 0) << calc.err;
  const auto per_token = nlohmann::json::parse(calc.out)["bytes_per_token"].get<double>();
  const std::vector<std::string> bench = {
      "bench", "--quick", "--reps", "1", "-m", default_model_path(), "--tp", "2", "--json", dir.file("bench.json")};
  const auto check = [&](const KvserveResult& r) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("on rank 0 of 2 (tensor parallel)"), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(read_file(dir.file("bench.json")));
    EXPECT_EQ(j["model"]["tensor_parallel"], 2);
    EXPECT_EQ(j["model"]["kv_bytes_per_token"].get<double>(), per_token);
    EXPECT_GT(j["decode_tok_s"]["0"].get<double>(), 0.0) << j.dump();
    EXPECT_GT(j["decode_contiguous_tok_s"]["0"].get<double>(), 0.0) << j.dump();
  };
  check(run_kvserve(bench, dir));
  if (!std::string(KVS_MPIRUN).empty()) check(run_command(mpirun(2, bench), dir));
  const auto twin = run_kvserve(with(bench, {"--prefill-model", default_model_path()}), dir);
  EXPECT_NE(twin.exit_code, 0);
  EXPECT_NE(twin.err.find("only the measured model is split"), std::string::npos) << twin.err;
}

// Rank 1 killed (SIGKILL) while rank 0 streams 8 completions of 480 tokens (~0.5 s of work): mpirun ends the job,
// naming the rank, instead of rank 0 waiting for ever in its next collective.
TEST(CliTensorParallel, ARankKilledMidRequestEndsTheJobNamingIt) {
  if (std::string(KVS_MPIRUN).empty()) GTEST_SKIP() << kNoMpi;
  TempDir dir("tp-rank-dies");
  std::string job;
  for (const std::string& a : mpirun(2, {"serve", "--tp", "2", "--port", "0", "-m", default_model_path()}))
    job.append(job.empty() ? "" : " ").append(shell_quote(a));
  const std::string log = dir.file("serve.out");
  // The job in the background; its serving line gives the port; a streamed completion over bash's /dev/tcp; rank 1
  // is the child of mpirun whose environment says OMPI_COMM_WORLD_RANK=1.
  const std::string script = job + " > " + shell_quote(log) + R"( 2>&1 &
timer=$!
for i in $(seq 600); do grep -q 'pid [0-9]' )" +
                             shell_quote(log) + R"( && break; sleep 0.1; done
port=$(grep -o 'http://[^ ]*:[0-9]*' )" +
                             shell_quote(log) + R"( | head -1 | sed 's/.*://')
body='{"prompt":"Once upon a time","max_tokens":480,"n":8,"stream":true}'
exec 3<>/dev/tcp/127.0.0.1/$port
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' ${#body} "$body" >&3
head -c 400 <&3 | grep -q "^data: {" && echo "streaming"
mpirun_pid=$(pgrep -P $timer)
for c in $(pgrep -P $mpirun_pid); do
  if tr '\0' '\n' < /proc/$c/environ | grep -qx OMPI_COMM_WORLD_RANK=1; then kill -9 $c; echo "killed $c"; fi
done
wait $timer
echo "job exit $?"
cat )" + shell_quote(log) + "\n";
  const auto r = run_command({"bash", "-c", script}, dir);
  EXPECT_NE(r.out.find("streaming\nkilled "), std::string::npos) << "rank 1 killed while tokens streamed\n"
                                                                 << r.out << r.err;
  EXPECT_EQ(r.out.find("job exit 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("job exit 124"), std::string::npos) << "timed out: rank 0 waited for ever\n" << r.out;
  EXPECT_NE(r.out.find("rank 1"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvs::test
