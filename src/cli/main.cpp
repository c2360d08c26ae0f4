// kvserve: command-line entry point. Subcommands live in one file each (cmd_*.cpp).
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "tensor/isa.h"

int main(int argc, char** argv) {
  CLI::App app{"kvserve: a CPU LLM inference engine built around its KV cache"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  // The kernels' instruction set: the CPU's best by default; a lower level runs the code paths of
  // an older CPU (the test suite does this on every host). Applied before any subcommand runs.
  app.fallthrough();
  app.add_option_function<std::string>(
         "--isa",
         [](const std::string& name) {
           const auto isa = kvs::isa_from_name(name);
           if (!isa) throw CLI::ValidationError("--isa", "must be scalar, avx2, avxvnni or avx512, got '" + name + "'");
           kvs::set_isa_limit(*isa);
         },
         "Highest instruction set the kernels use: scalar, avx2, avxvnni (AVX2 with AVX-VNNI) or avx512 (default: the "
         "CPU's best)")
      ->envname("KVS_ISA");
  kvs::cli::register_run(app);
  kvs::cli::register_perplexity(app);
  kvs::cli::register_convert(app);
  kvs::cli::register_synth(app);
  kvs::cli::register_calc(app);
  kvs::cli::register_serve(app);
  kvs::cli::register_loadgen(app);
  kvs::cli::register_bench(app);
  kvs::cli::register_devices(app);
  std::string known;
  bool is_known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    is_known = is_known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !is_known) {
    std::fprintf(stderr, "kvserve: error: unknown subcommand '%s' (known: %s)\n", argv[1], known.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kvs::cli::CommandError& e) {
    std::fprintf(stderr, "kvserve: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
