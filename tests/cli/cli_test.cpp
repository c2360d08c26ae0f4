// The kvserve binary end to end: real model files, real flags, real exit codes and messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model/synth.h"
#include "run_kvserve.h"
#include "test_support.h"

namespace kvs {
namespace {

using test::run_kvserve;
using CommandResult = test::KvserveResult;

// A clean failure: exit code 1 or CLI11's parse error code, never a signal or an internal error.
void expect_clean_error(const CommandResult& r, const std::string& must_mention) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal; stderr: " << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(must_mention), std::string::npos) << "stderr should mention '" << must_mention << "': " << r.err;
}

TEST(Cli, RunGeneratesTheKnownStoryGreedily) {
  test::TempDir dir("cli_run");
  auto r = run_kvserve({"run", "-p", "Once upon a time", "-n", "30", "--temp", "0"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("prompt 5 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("KV cache"), std::string::npos) << r.err;
  auto baseline = run_kvserve({"run", "-p", "Once upon a time", "-n", "30", "--temp", "0", "--no-kv-cache"}, dir);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.err;
  EXPECT_EQ(baseline.out, r.out);
}

TEST(Cli, SeededSamplingIsReproducible) {
  test::TempDir dir("cli_seed");
  const std::vector<std::string> args = {"run", "-p", "Lily", "-n", "40", "--temp", "1.0", "--seed", "7"};
  auto a = run_kvserve(args, dir);
  auto b = run_kvserve(args, dir);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, StopStringEndsGenerationBeforeIt) {
  test::TempDir dir("cli_stop");
  auto r = run_kvserve({"run", "-p", "Once upon a time", "-n", "100", "--temp", "0", "--stop", "Lily"}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time, there was a little girl named \n");
  EXPECT_NE(r.err.find("(stop)"), std::string::npos) << r.err;
}

TEST(Cli, MissingModelFileIsNamed) {
  test::TempDir dir("cli_missing");
  auto r = run_kvserve({"run", "-m", dir.file("nope.gguf"), "-p", "hi"}, dir);
  expect_clean_error(r, "nope.gguf");
}

TEST(Cli, BadMagicIsReported) {
  test::TempDir dir("cli_magic");
  std::ofstream(dir.file("bad.gguf")) << "NOPE this is not a gguf file at all, just text padding padding";
  auto r = run_kvserve({"run", "-m", dir.file("bad.gguf"), "-p", "hi"}, dir);
  expect_clean_error(r, "magic");
}

TEST(Cli, TruncatedModelIsReportedNotCrashed) {
  test::TempDir dir("cli_trunc");
  const std::string path = dir.file("trunc.gguf");
  std::filesystem::copy_file(test::default_model_path(), path);
  for (uintmax_t size : {uintmax_t{20}, std::filesystem::file_size(path) / 2, std::filesystem::file_size(path) - 1}) {
    std::filesystem::resize_file(path, size);
    auto r = run_kvserve({"run", "-m", path, "-p", "hi"}, dir);
    expect_clean_error(r, "trunc.gguf");
  }
}

TEST(Cli, PromptLongerThanContextIsRejected) {
  test::TempDir dir("cli_ctx");
  auto spec = synth_preset("tiny-gqa");
  ASSERT_TRUE(spec);
  spec->ctx = 16;
  ASSERT_TRUE(write_synth_model(*spec, dir.file("small.gguf")).is_ok());
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "word ";
  auto r = run_kvserve({"run", "-m", dir.file("small.gguf"), "-p", prompt}, dir);
  expect_clean_error(r, "context");
  EXPECT_NE(r.err.find("16"), std::string::npos) << r.err;
}

TEST(Cli, InvalidFlagsAreRejectedWithTheValue) {
  test::TempDir dir("cli_flags");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--temp", "-1"}, dir), "-1");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--threads", "0"}, dir), "threads");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--top-p", "1.5"}, dir), "1.5");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--bogus"}, dir), "--bogus");
  expect_clean_error(run_kvserve({"run"}, dir), "prompt");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "-n", "many"}, dir), "many");
  expect_clean_error(run_kvserve({"frobnicate"}, dir), "frobnicate");
}

// --isa (and KVS_ISA) limit the kernels; every level gives the same greedy story, and a bad name is an error.
TEST(Cli, IsaFlagChoosesTheKernelsAndKeepsTheStory) {
  test::TempDir dir("cli_isa");
  const std::vector<std::string> story = {"run", "-p", "Once upon a time", "-n", "30", "--temp", "0"};
  auto scalar_args = story;
  scalar_args.insert(scalar_args.end(), {"--isa", "scalar"});
  auto scalar = run_kvserve(scalar_args, dir);
  ASSERT_EQ(scalar.exit_code, 0) << scalar.err;
  EXPECT_NE(scalar.err.find("scalar kernels"), std::string::npos) << scalar.err;
  auto best = run_kvserve(story, dir);
  ASSERT_EQ(best.exit_code, 0) << best.err;
  EXPECT_EQ(best.out, scalar.out);
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--isa", "avx9"}, dir), "avx9");
}

TEST(Cli, PerplexityMatchesReference) {
  test::TempDir dir("cli_ppl");
  auto r = run_kvserve({"perplexity", "-f", test::shared_path("eval/tinystories_valid_head.txt"), "--bytes", "60000",
                        "--chunk", "512", "--chunks", "8"},
                       dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto pos = r.out.find("perplexity ");
  ASSERT_NE(pos, std::string::npos) << r.out;
  EXPECT_NEAR(std::stod(r.out.substr(pos + 11)), 3.941287, 3.941287e-3) << r.out;
}

TEST(Cli, HelpExplainsEverySubcommand) {
  test::TempDir dir("cli_help");
  auto r = run_kvserve({"--help"}, dir);
  EXPECT_EQ(r.exit_code, 0);
  for (const char* sub : {"run", "perplexity", "convert", "synth"})
    EXPECT_NE(r.out.find(sub), std::string::npos) << sub;
  auto run_help = run_kvserve({"run", "--help"}, dir);
  EXPECT_NE(run_help.out.find("--no-kv-cache"), std::string::npos);
}

// kvserve run under an eviction policy: 1,100 tokens (twice the context) with a budget of 64 report at most 4 blocks
// held and the tokens evicted; calc predicts those bytes for a sequence of any length; bad policy flags name the
// flag and the value.
TEST(CliKv, RunUnderAPolicyReportsTheBudgetHeldAndCalcPredictsIt) {
  test::TempDir dir("cli_kv_policy");
  auto run = run_kvserve({"run", "-p", "Once upon a time", "-n", "1100", "--temp", "0", "--ignore-eos", "--kv-policy",
                          "sinks", "--kv-budget", "64"},
                         dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("generated 1100 tokens"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("KV policy sinks (budget 64, 4 sinks): a sequence of 1105 tokens, at most 4 blocks held"),
            std::string::npos)
      << run.err;
  // Positions 0..1103 are computed (the last token never is) through a cache of 64: an eviction of 16 before
  // positions 64, 80, ..., 1088, when it is full.
  EXPECT_NE(run.err.find("1040 tokens evicted in 65 evictions"), std::string::npos) << run.err;
  const size_t at = run.err.find("tokens of room, ");
  ASSERT_NE(at, std::string::npos) << run.err;
  const size_t held = std::stoul(run.err.substr(at + 16));
  auto calc = run_kvserve({"calc", "-m", test::default_model_path(), "--tokens", "1000000", "--kv-dtype", "f32",
                           "--kv-policy", "sinks", "--kv-budget", "64", "--json"},
                          dir);
  ASSERT_EQ(calc.exit_code, 0) << calc.err;
  EXPECT_EQ(nlohmann::json::parse(calc.out)["bytes_per_seq"].get<size_t>(), held);
  for (const auto& [flags, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--kv-policy", "lru", "--kv-budget", "64"}, "unknown KV policy 'lru'"},
           {{"--kv-policy", "sinks"}, "--kv-policy sinks needs --kv-budget"},
           {{"--kv-budget", "64"}, "--kv-budget 64 needs an evicting --kv-policy"},
           {{"--kv-policy", "h2o", "--kv-budget", "64", "--kv-scores", "all"},
            "unknown heavy-hitter score scope 'all'"},
           {{"--kv-policy", "sinks", "--kv-budget", "4096"}, "exceeds the model's context of 512"},
           {{"--kv-policy", "sinks", "--kv-budget", "64", "--kv-dtype", "int8", "--kv-key-scales", "channel"},
            "--kv-key-scales token"}}) {
    std::vector<std::string> args = {"run", "-p", "x", "-n", "4"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto bad = run_kvserve(args, dir);
    EXPECT_EQ(bad.exit_code, 1) << says;
    EXPECT_NE(bad.err.find(says), std::string::npos) << bad.err;
  }
}

}  // namespace
}  // namespace kvs

namespace kvs {
namespace {

TEST(CliKv, BudgetFlagsReportBlocksAndStopCleanlyWhenExhausted) {
  test::TempDir dir("cli_kv");
  auto ok = run_kvserve({"run", "-p", "Once upon a time", "-n", "40", "--temp", "0", "--kv-memory", "1MiB"}, dir);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  // stories260K: 5 layers x 4 kv heads x 8 dims x K,V x 4 bytes x 16 tokens = 20480 bytes a block.
  EXPECT_NE(ok.err.find("KV cache 1044480 bytes allocated, 3/51 blocks used (61440 bytes"), std::string::npos)
      << ok.err;
  auto full = run_kvserve({"run", "-p", "Once upon a time", "-n", "100", "--temp", "0", "--kv-blocks", "2"}, dir);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_NE(full.err.find("KV cache exhausted"), std::string::npos) << full.err;
  EXPECT_EQ(full.out.rfind("Once upon a time, there was a little girl", 0), 0u) << full.out;  // kept what it had
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--kv-memory", "1KiB"}, dir), "smaller than one KV block");
  // A prompt larger than the whole pool: the engine's clear error (this aborted on an unknown sequence once).
  expect_clean_error(
      run_kvserve({"run", "-p", "Once upon a time, there was a little girl", "--kv-blocks", "1", "--block-size", "1"},
                  dir),
      "the whole pool has 1");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--kv-memory", "lots"}, dir), "lots");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--block-size", "24"}, dir), "got 24");
}

TEST(CliKv, HalfPrecisionKvHoldsTwiceTheBlocksAndKeepsTheStory) {
  test::TempDir dir("cli_kv_dtype");
  const std::vector<std::string> args = {"run",    "-p", "Once upon a time", "-n",  "60",
                                         "--temp", "0",  "--kv-memory",      "1MiB"};
  auto f32 = run_kvserve(args, dir);
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  for (const char* type : {"f16", "bf16"}) {
    auto with_type = args;
    with_type.insert(with_type.end(), {"--kv-dtype", type});
    auto half = run_kvserve(with_type, dir);
    ASSERT_EQ(half.exit_code, 0) << half.err;
    // 10240 bytes a block in 16-bit elements: 102 blocks in the same MiB; 4 blocks hold 65 tokens.
    EXPECT_NE(half.err.find("4/102 blocks used (40960 bytes"), std::string::npos) << half.err;
    EXPECT_NE(half.err.find(std::string("head dim, ") + type + ")"), std::string::npos) << half.err;
    EXPECT_EQ(half.out, f32.out) << type;  // the greedy story is unchanged
  }
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--kv-dtype", "f8"}, dir), "'f8'");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--kv-dtype-k", "int9"}, dir), "--kv-dtype-k 'int9'");
  expect_clean_error(run_kvserve({"serve", "--kv-dtype-v", "int3"}, dir), "--kv-dtype-v 'int3'");
  expect_clean_error(run_kvserve({"run", "-p", "hi", "--kv-key-scales", "row"}, dir), "--kv-key-scales 'row'");
  expect_clean_error(run_kvserve({"perplexity", "-f", "x.txt", "--kv-dtype", "f64"}, dir), "'f64'");
}

TEST(CliKv, CalcGivesTheDesignNoteFigures) {
  test::TempDir dir("cli_calc");
  auto a = run_kvserve({"calc", "--preset", "llama-2-7b", "--tokens", "2048", "--kv-dtype", "f16", "--json"}, dir);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto ja = nlohmann::json::parse(a.out);
  EXPECT_EQ(ja["total_bytes"].get<size_t>(), 1'073'741'824u);
  auto b = run_kvserve(
      {"calc", "--preset", "llama-3-70b", "--tokens", "128000", "--kv-dtype", "f16", "--budget", "80GiB", "--json"},
      dir);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(jb["total_bytes"].get<size_t>(), 41'943'040'000u);
  EXPECT_EQ(jb["max_seqs_in_budget"].get<size_t>(), 2u);
  EXPECT_DOUBLE_EQ(jb["bytes_per_token"].get<double>(), 327680.0);
  auto text = run_kvserve({"calc", "--preset", "llama-3-70b", "--tokens", "128000", "--kv-dtype", "f16"}, dir);
  EXPECT_NE(text.out.find("41943040000 bytes (39.06 GiB)"), std::string::npos) << text.out;
  auto model =
      run_kvserve({"calc", "-m", test::default_model_path(), "--tokens", "100", "--kv-dtype", "f32", "--json"}, dir);
  ASSERT_EQ(model.exit_code, 0) << model.err;
  EXPECT_EQ(nlohmann::json::parse(model.out)["total_bytes"].get<size_t>(), 7u * 20480);
  expect_clean_error(run_kvserve({"calc", "--preset", "gpt-5"}, dir), "gpt-5");
  expect_clean_error(run_kvserve({"calc", "--preset", "llama-2-7b", "--kv-dtype", "fp8"}, dir), "fp8");
}

// Gemma 3's hybrid layout: calc's figures are the engine's. A tiny gemma3 file (6 window layers of 8 tokens, 1
// global) runs 100 tokens; the bytes its sequence held at the end are what calc predicts for its computed
// tokens (the prompt and all but the last generated one), which --no-kv-hybrid raises to every layer's whole
// context; calc of the released shapes gives Gemma 3's own savings.
TEST(CliKv, CalcPredictsTheBytesTheHybridLayoutHolds) {
  test::TempDir dir("cli_calc_hybrid");
  const std::string model = dir.file("g.gguf");
  ASSERT_EQ(run_kvserve({"synth", "--preset", "tiny-gemma3", "-o", model}, dir).exit_code, 0);
  const auto held_bytes = [](const std::string& err) {
    const size_t at = err.find("blocks used (");
    return at == std::string::npos ? 0 : std::stoul(err.substr(at + 13));
  };
  const auto calc_bytes = [&](std::vector<std::string> extra, size_t tokens) {
    std::vector<std::string> args = {"calc",       "-m",  model,   "--tokens", std::to_string(tokens),
                                     "--kv-dtype", "f32", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_kvserve(args, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["bytes_per_seq"].get<size_t>() : 0;
  };
  for (const std::vector<std::string>& layout : {std::vector<std::string>{}, {"--no-kv-hybrid"}}) {
    std::vector<std::string> args = {"run", "-m", model, "-p", "hello", "-n", "100", "--temp", "0", "--ignore-eos"};
    args.insert(args.end(), layout.begin(), layout.end());
    auto run = run_kvserve(args, dir);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const size_t prompt = std::stoul(run.err.substr(run.err.find("prompt ") + 7));
    EXPECT_EQ(held_bytes(run.err), calc_bytes(layout, prompt + 99)) << run.err;
  }
  EXPECT_LT(calc_bytes({}, 2000) * 3, calc_bytes({"--no-kv-hybrid"}, 2000));
  auto gemma =
      run_kvserve({"calc", "--preset", "gemma-3-27b", "--tokens", "131072", "--kv-dtype", "f16", "--json"}, dir);
  ASSERT_EQ(gemma.exit_code, 0) << gemma.err;
  const auto j = nlohmann::json::parse(gemma.out);
  // 10 global layers x 131072 tokens and 52 layers x 64 blocks of 16 tokens, x 16 KV heads x 128 x K,V x 2 bytes.
  EXPECT_EQ(j["bytes_per_seq"].get<size_t>(), (size_t{10} * 131072 + 52 * 64 * 16) * 16 * 128 * 2 * 2);
  EXPECT_EQ(j["bytes_per_seq_all_global"].get<size_t>(), 62ull * 131072 * 16 * 128 * 2 * 2);
  auto forced =
      run_kvserve({"calc", "--preset", "llama-3-8b", "--tokens", "32768", "--kv-window", "4096", "--json"}, dir);
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(nlohmann::json::parse(forced.out)["bytes_per_seq"].get<size_t>(), 256u * 16 * 32 * 8 * 128 * 2 * 2);
}

// MLA: `calc -m` of a deepseek2 file sizes its latent cache (kv_lora_rank + rope per token and layer, no V), and that
// is what `run` holds, for f32, f16 and int8 latents; the released DeepSeek-V2-Lite shape holds 576 values per token
// and layer (89% less than an MHA cache of its 16 heads of 192 + 128). `perplexity --mla-form` runs either form.
TEST(CliKv, CalcPredictsTheBytesAnMlaLatentCacheHolds) {
  test::TempDir dir("cli_calc_mla");
  const std::string model = dir.file("d.gguf");
  ASSERT_EQ(run_kvserve({"synth", "--preset", "tiny-deepseek2", "-o", model}, dir).exit_code, 0);
  for (const char* dtype : {"f32", "f16", "int8"}) {
    auto run = run_kvserve(
        {"run", "-m", model, "-p", "hello", "-n", "60", "--temp", "0", "--ignore-eos", "--kv-dtype", dtype}, dir);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const size_t prompt = std::stoul(run.err.substr(run.err.find("prompt ") + 7));
    const size_t at = run.err.find("blocks used (");
    ASSERT_NE(at, std::string::npos) << run.err;
    auto calc =
        run_kvserve({"calc", "-m", model, "--tokens", std::to_string(prompt + 59), "--kv-dtype", dtype, "--json"}, dir);
    ASSERT_EQ(calc.exit_code, 0) << calc.err;
    const auto j = nlohmann::json::parse(calc.out);
    EXPECT_EQ(j["attention"], "MLA");
    EXPECT_EQ(std::stoul(run.err.substr(at + 13)), j["bytes_per_seq"].get<size_t>()) << dtype << ": " << run.err;
    if (std::string(dtype) == "f32") {
      EXPECT_DOUBLE_EQ(j["bytes_per_token"].get<double>(), 3.0 * (32 + 16) * 4);
    }
  }
  // Perplexity in either attention form: the same model within fp32 rounding; a form that does not exist is named.
  const auto perplexity = [&](const char* form) {
    auto r = run_kvserve({"perplexity", "-m", model, "-f", test::shared_path("eval/tinystories_sample.txt"), "--chunk",
                          "128", "--chunks", "4", "--mla-form", form},
                         dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.out.find("perplexity ");
    return at == std::string::npos ? 0.0 : std::stod(r.out.substr(at + 11));
  };
  const double absorbed = perplexity("absorbed"), expanded = perplexity("expanded");
  EXPECT_GT(absorbed, 1.0);
  EXPECT_NEAR(absorbed, expanded, 1e-5 * absorbed);
  expect_clean_error(run_kvserve({"run", "-m", model, "-p", "a", "--mla-form", "sideways"}, dir), "sideways");
  auto lite =
      run_kvserve({"calc", "--preset", "deepseek-v2-lite", "--tokens", "4096", "--kv-dtype", "f16", "--json"}, dir);
  ASSERT_EQ(lite.exit_code, 0) << lite.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(lite.out)["bytes_per_token"].get<double>(), 27.0 * 576 * 2);
}

// --kv-disk: a second process finds the first one's prompt blocks on disk and loads them (same output);
// calc --kv-host / --kv-disk-size predicts the blocks the tiers hold and the bytes of a block file.
TEST(CliKv, ADiskTierCarriesAPromptAcrossProcessesAndCalcSizesItsFiles) {
  test::TempDir dir("cli_kv_tiers");
  const std::string cache = dir.file("kv");
  const std::vector<std::string> args = {"run",
                                         "-p",
                                         "Once upon a time, there was a little girl named Lily. She loved "
                                         "to play outside in the park with her friends.",
                                         "-n",
                                         "20",
                                         "--temp",
                                         "0",
                                         "--kv-disk",
                                         cache,
                                         "--kv-disk-size",
                                         "1MiB"};
  auto first = run_kvserve(args, dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("(0 from the prefix cache)"), std::string::npos) << first.err;
  auto second = run_kvserve(args, dir);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  const size_t at = second.err.find("KV tiers: ");
  ASSERT_NE(at, std::string::npos) << second.err;
  const size_t loaded = std::stoul(second.err.substr(at + 10));
  EXPECT_GT(loaded, 0u) << second.err;
  EXPECT_NE(second.err.find(fmt::format("({} from the prefix cache)", loaded)), std::string::npos) << second.err;
  // "disk holds N blocks (B bytes)": B / N is one block file.
  const size_t disk = second.err.find("disk holds ");
  ASSERT_NE(disk, std::string::npos) << second.err;
  const size_t files = std::stoul(second.err.substr(disk + 11));
  const size_t file_bytes = std::stoul(second.err.substr(second.err.find('(', disk) + 1));
  ASSERT_GT(files, 0u);
  auto calc = run_kvserve({"calc", "-m", test::default_model_path(), "--kv-dtype", "f32", "--kv-host", "1MiB",
                           "--kv-disk-size", "1MiB", "--json"},
                          dir);
  ASSERT_EQ(calc.exit_code, 0) << calc.err;
  const auto j = nlohmann::json::parse(calc.out);
  EXPECT_EQ(j["kv_disk_tier"]["file_bytes_per_block"].get<size_t>() * files, file_bytes);
  EXPECT_EQ(j["kv_disk_tier"]["blocks"].get<size_t>(), (size_t{1} << 20) / (file_bytes / files));
  EXPECT_EQ(j["kv_host_tier"]["blocks"].get<size_t>(), (size_t{1} << 20) / 20480) << "blocks of 20480 bytes";
  EXPECT_EQ(j["kv_host_tier"]["tokens"].get<size_t>(), 16 * ((size_t{1} << 20) / 20480));
  for (const auto& [flags, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--kv-disk-size", "1GiB"}, "--kv-disk-size requires --kv-disk"},
           {{"--kv-host", "12XB"}, "--kv-host 12XB: unknown unit 'XB'"},
           {{"--kv-host", "1KiB"}, "holds no block of 20480 bytes"},
           {{"--kv-host", "1MiB", "--no-prefix-cache"}, "KV offload tiers and the prefix cache off do not combine"},
           {{"--kv-preempt", "swap"}, "--kv-preempt swap and no --kv-host do not combine"},
           {{"--kv-preempt", "sideways", "--kv-host", "1MiB"},
            "--kv-preempt: sideways not in {auto,swap,recompute}"}}) {
    std::vector<std::string> bad_args = {"run", "-p", "x", "-n", "4"};
    bad_args.insert(bad_args.end(), flags.begin(), flags.end());
    expect_clean_error(run_kvserve(bad_args, dir), says);
  }
  // Not a directory of ours: said, and the run goes on without it.
  const std::string file = dir.file("a-file");
  std::ofstream(file) << "mine";
  auto foreign = run_kvserve({"run", "-p", "Once upon a time", "-n", "4", "--kv-disk", file}, dir);
  EXPECT_EQ(foreign.exit_code, 0) << foreign.err;
  EXPECT_NE(foreign.err.find("running without a disk tier"), std::string::npos) << foreign.err;
}

// The hierarchy with the pool on the GPU (lavapipe here): a disk tier written by a CPU run serves a GPU run of the
// same model and KV format (the same output, its prompt blocks loaded), and the GPU run's serves a CPU run; calc
// --device vulkan says what the GPU pool, the host tier and the disk tier each hold.
TEST(CliKv, ADiskTierServesRunsOnEitherDeviceAndCalcSizesTheGpuPool) {
  test::TempDir dir("cli_kv_tiers_gpu");
  if (vulkan_devices(dir) == 0) GTEST_SKIP() << "no Vulkan device";
  const std::vector<std::string> args = {
      "run",
      "-p",
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
      "-n",
      "20",
      "--temp",
      "0",
      "--kv-disk",
      dir.file("kv")};
  const auto loaded = [](const test::KvserveResult& r) {
    const size_t at = r.err.find("KV tiers: ");
    return at == std::string::npos ? size_t{0} : std::stoul(r.err.substr(at + 10));
  };
  const auto cpu = run_kvserve(args, dir);
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  auto on_gpu = args;
  on_gpu.insert(on_gpu.end(), {"--device", "vulkan:0"});
  const auto gpu = run_kvserve(on_gpu, dir);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_EQ(gpu.out, cpu.out);
  EXPECT_GT(loaded(gpu), 0u) << gpu.err;
  std::filesystem::remove_all(dir.file("kv"));
  const auto gpu_first = run_kvserve(on_gpu, dir);
  ASSERT_EQ(gpu_first.exit_code, 0) << gpu_first.err;
  const auto cpu_second = run_kvserve(args, dir);
  ASSERT_EQ(cpu_second.exit_code, 0) << cpu_second.err;
  EXPECT_EQ(cpu_second.out, cpu.out);
  EXPECT_EQ(loaded(cpu_second), loaded(gpu)) << cpu_second.err;

  auto calc = run_kvserve({"calc", "-m", test::default_model_path(), "--kv-dtype", "f32", "--device", "vulkan:0",
                           "--budget", "1MiB", "--kv-host", "2MiB", "--kv-disk-size", "4MiB", "--json"},
                          dir);
  ASSERT_EQ(calc.exit_code, 0) << calc.err;
  const auto j = nlohmann::json::parse(calc.out);
  EXPECT_EQ(j["kv_gpu_pool"]["blocks"].get<size_t>(), (size_t{1} << 20) / 20480) << "blocks of 20480 bytes";
  EXPECT_EQ(j["kv_gpu_pool"]["tokens"].get<size_t>(), 16 * ((size_t{1} << 20) / 20480));
  EXPECT_FALSE(j["kv_gpu_pool"]["device"].get<std::string>().empty());
  EXPECT_EQ(j["kv_host_tier"]["blocks"].get<size_t>(), (size_t{2} << 20) / 20480);
  expect_clean_error(run_kvserve({"calc", "-m", test::default_model_path(), "--device", "vulkan:99"}, dir),
                     "--device vulkan:99: no Vulkan device 99");
  expect_clean_error(run_kvserve({"run", "-p", "x", "-n", "4", "--kv-load-timeout-ms", "10"}, dir),
                     "--kv-load-timeout-ms requires --kv-disk");
}

}  // namespace
}  // namespace kvs
