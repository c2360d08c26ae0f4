// kvserve: command-line entry point. Subcommands live in one file each (cmd_*.cpp).
#include <cstdio>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kvserve: a CPU LLM inference engine built around its KV cache"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  kvs::cli::register_run(app);
  kvs::cli::register_perplexity(app);
  kvs::cli::register_convert(app);
  kvs::cli::register_synth(app);
  kvs::cli::register_calc(app);
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
