// `kvserve convert`: llama2.c checkpoint + tokenizer -> GGUF.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "model/llama2c_import.h"

namespace kvs::cli {

void register_convert(CLI::App& app) {
  struct Options {
    std::string checkpoint;
    std::string tokenizer;
    std::string output;
    std::string type = "f32";
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a llama2.c checkpoint and its tokenizer to a GGUF file");
  cmd->add_option("--llama2c", opts->checkpoint, "llama2.c legacy checkpoint (.bin: 7 int32 header, then fp32 weights)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", opts->tokenizer, "llama2.c tokenizer export (e.g. tok512.bin)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opts->output, "GGUF file to write")->required();
  cmd->add_option("--type", opts->type,
                  "Type of the 2-D weights: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, "
                  "q3_k, q4_k, q5_k, q6_k, or the recipes q4_k_m, q5_k_m (llama.cpp's: Q6_K for the output and half "
                  "the attn_v/ffn_down). Norms stay f32; rows that are not whole blocks fall back as llama.cpp's "
                  "quantizer does (q4_k: q5_0, q5_k: q5_1, q6_k: q8_0, q2_k/q3_k/iq4_xs: iq4_nl; else f16)")
      ->capture_default_str();
  cmd->callback([opts] {
    const auto types = WeightTypes::parse(opts->type);
    if (!types) throw CommandError(fmt::format("--type: {}", types.status().message()));
    const Status status = import_llama2c(opts->checkpoint, opts->tokenizer, opts->output, *types);
    if (!status) throw CommandError(status.message());
    fmt::print("wrote {} ({})\n", opts->output, opts->type);
  });
}

}  // namespace kvs::cli
