// `kvserve synth`: writes a random-weight llama, qwen2, gemma3 or deepseek2 model of a preset or custom shape.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "model/llama2c_import.h"
#include "model/synth.h"

namespace kvs::cli {
namespace {

struct Options {
  std::string preset;
  SynthSpec custom;  // shape flags land here; only those given override the preset
  std::string type = "f32";
  std::string rope_scaling;
  bool tied_output = false;
  std::string chat_template_file;
  std::string output;
};

}  // namespace

void register_synth(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("synth",
                         "Write a llama, qwen2, gemma3 or deepseek2 (presets) model with random weights (a preset, or "
                         "a custom shape given by "
                         "--layers --dim --heads --ffn --vocab); shape flags given with --preset override the preset");
  cmd->add_option("--preset", opts->preset,
                  fmt::format("Model shape preset: {}", fmt::join(synth_preset_names(), ", ")));
  cmd->add_option("--arch", opts->custom.architecture,
                  "Architecture: llama, qwen2 (Q/K/V biases, NeoX RoPE) or gemma3 (default: the preset's, or llama)")
      ->check(CLI::IsMember({"llama", "qwen2", "gemma3"}));
  cmd->add_option("--layers", opts->custom.layers, "Number of transformer blocks");
  cmd->add_option("--dim", opts->custom.dim, "Embedding width (a multiple of --heads)");
  cmd->add_option("--heads", opts->custom.heads, "Query heads; head_dim = dim / heads must be even");
  cmd->add_option("--head-dim", opts->custom.head_dim, "Width of a head when not dim / heads (Gemma 3: 256)");
  cmd->add_option("--sliding-window", opts->custom.sliding_window,
                  "gemma3: the window of its local layers (5 of every 6); llama: of every layer (Mistral 7B v0.1)");
  cmd->add_flag("--qkv-bias", opts->custom.qkv_bias, "Q/K/V projections with biases (qwen2 always has them)");
  cmd->add_option("--rope-scaling", opts->rope_scaling,
                  "RoPE scaling: none, linear (angles / --rope-factor) or llama3 (Llama 3.1's per-pair factors over "
                  "--rope-original-context, written as rope_freqs.weight)")
      ->check(CLI::IsMember({"none", "linear", "llama3"}));
  cmd->add_option("--rope-factor", opts->custom.rope_factor, "RoPE scaling factor (Llama 3.2: 32)");
  cmd->add_option("--rope-original-context", opts->custom.rope_original_context,
                  "llama3 RoPE scaling: the context the model was trained with before scaling (Llama 3.1: 8192)");
  cmd->add_option("--kv-heads", opts->custom.kv_heads,
                  "Key/value heads: = heads for MHA, 1 for MQA, a divisor of heads for GQA (default: --heads)");
  cmd->add_option("--ffn", opts->custom.ffn, "Feed-forward hidden width");
  cmd->add_option("--vocab", opts->custom.vocab, "Vocabulary size, at least 259 (3 special + 256 byte tokens)");
  cmd->add_option("--ctx", opts->custom.ctx, "Context length written to llama.context_length (default 2048)");
  cmd->add_option("--rope-base", opts->custom.rope_base, "RoPE frequency base (default 10000)");
  cmd->add_option("--type", opts->type,
                  "Type of the 2-D weights: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (dim and ffn "
                  "multiples of 32), iq4_xs, q2_k, q3_k, q4_k, q5_k, q6_k, or the recipes q4_k_m, q5_k_m (rows "
                  "that are not whole super-blocks of 256 fall back as llama.cpp's quantizer does: q4_k to q5_0, "
                  "q5_k to q5_1, q6_k to q8_0, q2_k/q3_k/iq4_xs to iq4_nl)")
      ->capture_default_str();
  cmd->add_option("--seed", opts->custom.seed, "Random seed; the same seed and shape give the same file")
      ->capture_default_str();
  cmd->add_flag("--tied-output,!--untied-output", opts->tied_output,
                "Share the classifier with token_embd.weight (no output.weight); default: the preset's choice, "
                "untied for custom shapes");
  cmd->add_option("--chat-template", opts->chat_template_file,
                  "A Jinja chat template file, written as tokenizer.chat_template")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer-from", opts->custom.tokenizer_from,
                  "A GGUF model or vocabulary file whose tokenizer (tokens, merges, pre-tokenizer, special ids, chat "
                  "template) the model gets; --vocab is then its token count")
      ->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", opts->output, "GGUF file to write")->required();

  cmd->callback([opts, cmd] {
    SynthSpec spec;
    if (!opts->preset.empty()) {
      auto preset = synth_preset(opts->preset);
      if (!preset) throw CommandError(preset.status().message());
      spec = *preset;
    } else {
      for (const char* flag : {"--layers", "--dim", "--heads", "--ffn", "--vocab"}) {
        if (cmd->count(flag) == 0) {
          throw CommandError(fmt::format("synth needs --preset or a full shape; {} is missing", flag));
        }
      }
      spec.kv_heads = opts->custom.heads;
      spec.ctx = 2048;
    }
    const SynthSpec& c = opts->custom;
    if (cmd->count("--arch")) spec.architecture = c.architecture;
    if (cmd->count("--head-dim")) spec.head_dim = c.head_dim;
    if (cmd->count("--sliding-window")) spec.sliding_window = c.sliding_window;
    if (cmd->count("--layers")) spec.layers = c.layers;
    if (cmd->count("--dim")) spec.dim = c.dim;
    if (cmd->count("--heads")) spec.heads = c.heads;
    if (cmd->count("--kv-heads")) spec.kv_heads = c.kv_heads;
    if (cmd->count("--ffn")) spec.ffn = c.ffn;
    if (cmd->count("--vocab")) spec.vocab = c.vocab;
    if (cmd->count("--ctx")) spec.ctx = c.ctx;
    if (cmd->count("--rope-base")) spec.rope_base = c.rope_base;
    if (cmd->count("--qkv-bias") || spec.architecture == "qwen2") spec.qkv_bias = true;
    if (!opts->rope_scaling.empty()) {
      spec.rope_scaling = opts->rope_scaling == "linear"   ? SynthRopeScaling::kLinear
                          : opts->rope_scaling == "llama3" ? SynthRopeScaling::kLlama3
                                                           : SynthRopeScaling::kNone;
    }
    if (cmd->count("--rope-factor")) spec.rope_factor = c.rope_factor;
    if (cmd->count("--rope-original-context")) spec.rope_original_context = c.rope_original_context;
    if (cmd->count("--tied-output") || cmd->count("--untied-output")) spec.tied_output = opts->tied_output;
    spec.seed = c.seed;
    spec.tokenizer_from = c.tokenizer_from;
    if (!opts->chat_template_file.empty()) {
      std::ifstream in(opts->chat_template_file, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      spec.chat_template = text.str();
    }
    const auto types = WeightTypes::parse(opts->type);
    if (!types) throw CommandError(fmt::format("--type: {}", types.status().message()));
    spec.type = types->base;
    spec.mixed_k = types->mixed;
    const Status status = write_synth_model(spec, opts->output);
    if (!status) throw CommandError(status.message());
    fmt::print("wrote {}: {} {} layers, dim {}, {} heads ({} kv), ffn {}, vocab {}, {}{}\n", opts->output,
               spec.architecture, spec.layers, spec.dim, spec.heads, spec.kv_heads, spec.ffn,
               spec.tokenizer_from.empty() ? std::to_string(spec.vocab) : "of " + spec.tokenizer_from, opts->type,
               spec.sliding_window ? fmt::format(", window {}", spec.sliding_window) : "");
  });
}

}  // namespace kvs::cli
