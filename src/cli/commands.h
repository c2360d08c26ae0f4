// Each subcommand registers itself on the CLI11 app; its file owns its flags and its run.
#pragma once

#include <CLI/CLI.hpp>

namespace kvs::cli {

// Every register_* adds one subcommand whose callback runs it. A subcommand that fails throws
// CommandError with the message to print; main() prints it to stderr and exits 1.
struct CommandError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes `text` to `path` (a report, a plot); throws CommandError naming the path when it cannot.
void write_text_file(const std::string& path, const std::string& text);

void register_run(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_convert(CLI::App& app);
void register_synth(CLI::App& app);
void register_calc(CLI::App& app);
void register_serve(CLI::App& app);
void register_loadgen(CLI::App& app);
void register_bench(CLI::App& app);
void register_devices(CLI::App& app);

}  // namespace kvs::cli
