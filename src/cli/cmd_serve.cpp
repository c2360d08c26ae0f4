// kvserve serve: the OpenAI-compatible HTTP server (see docs/SERVER.md). Loads the model, starts
// the engine loop and the listener, and shuts down cleanly on SIGINT / SIGTERM: the listener stops
// (open streams end), the engine loop stops, the command exits 0. A second signal exits at once.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/kv_dtype_option.h"
#include "cli/kv_tier_option.h"
#include "cli/model_options.h"
#include "core/byte_size.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "gpu/gpu_model.h"
#include "jinja/jinja_template.h"
#include "kv/kv_sizing.h"
#include "server/completion_service.h"
#include "server/http_server.h"
#include "server/served_model.h"

namespace kvs::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  server::HttpServerConfig http;
  EngineConfig engine;
  std::string kv_memory;                 // e.g. 512MiB
  KvPrecisionOptions kv{.both = "f16"};  // as llama.cpp serves: half the KV memory, perplexity within 1e-5
  KvTierOptions tiers;
  size_t completion_max_tokens = 16;
  std::string chat_template_file;  // replaces the model's tokenizer.chat_template
};

std::string read_chat_template(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CommandError(fmt::format("--chat-template: cannot read '{}'", path));
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = jinja::Template::parse(text.str());
  if (!parsed) throw CommandError(fmt::format("--chat-template '{}': {}", path, parsed.status().message()));
  return text.str();
}

// Blocks SIGINT and SIGTERM in every thread (construct before any thread starts) and waits for
// them on a thread of its own, which calls `on_signal` for the first and exits the process for a
// second. No signal handler runs, so there is no global state to touch from one.
class ShutdownSignals {
 public:
  ShutdownSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server
  }
  ~ShutdownSignals() {
    done_ = true;
    if (waiter_.joinable()) {
      if (!received_) pthread_kill(waiter_.native_handle(), SIGTERM);  // wakes sigwait; it sees done_
      waiter_.join();
    }
  }
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  void start(std::function<void()> on_signal) {
    waiter_ = std::thread([this, on_signal = std::move(on_signal)] {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0 || done_) return;
      received_ = true;
      std::fprintf(stderr, "kvserve: %s received, shutting down (again to exit at once)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      on_signal();
      // Second signal: stop waiting for open connections. The destructor cannot wake this wait
      // any more (received_), so it is bounded by the process exiting.
      std::thread([set = set_] {
        int again = 0;
        if (sigwait(&set, &again) == 0) std::_Exit(128 + again);
      }).detach();
    });
  }

 private:
  sigset_t set_{};
  std::thread waiter_;
  std::atomic<bool> done_{false};
  std::atomic<bool> received_{false};
};

EngineConfig engine_config(const ServeOptions& options) {
  EngineConfig config = options.engine;
  config.kv = parse_kv_precision(options.kv, config.kv);
  config.mla_form = parse_mla_form(options.kv);
  if (!options.kv_memory.empty()) {
    auto budget = parse_byte_size(options.kv_memory);
    if (!budget) throw CommandError("--kv-memory: " + budget.status().message());
    config.kv.memory_bytes = *budget;
  }
  config.kv.tiers = parse_kv_tier_options(options.tiers);
  apply_kv_tier_engine_options(options.tiers, config);
  if (Status s = config.validate(); !s) throw CommandError(s.message());
  return config;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void serve(const ServeOptions& options) {
  ShutdownSignals signals;  // first, so every thread started below inherits the blocked mask
  if (Status s = options.http.validate(); !s) throw CommandError(s.message());
  EngineConfig config = engine_config(options);
  LoadedModel loaded = load_model(options.model);
  if (serve_unless_root(loaded)) return;  // an MPI rank above 0 (--tp): rank 0 serves HTTP
  if (loaded.gpu && config.kv.memory_bytes == 0 && config.kv.blocks == 0) {
    // On the GPU the pool takes what the device has free after the weights and a step's activations.
    auto report = gpu_memory_report(*loaded.gpu, engine_kv_spec(*loaded.gpu, config), config.max_batch_tokens);
    if (!report) throw CommandError(report.status().message());
    if (report->kv_budget_bytes == 0) {
      throw CommandError(
          fmt::format("--device {}: no device memory left for the KV pool ({} free, weights {}, "
                      "activations up to {}): fewer --max-batch-tokens, or a smaller model",
                      options.model.device, format_byte_size(report->free_bytes),
                      format_byte_size(report->weight_bytes), format_byte_size(report->activation_bytes)));
    }
    config.kv.memory_bytes = report->kv_budget_bytes;
  }
  auto engine = Engine::create(loaded.engine_model(), *loaded.tokenizer, *loaded.pool, config);
  if (!engine) throw CommandError(engine.status().message());
  print_gpu_memory_line(loaded, **engine, config);
  EngineLoop loop(**engine);
  const std::string path = options.model.model_path.empty() ? default_model_path() : options.model.model_path;
  const server::ServedModel model = server::describe_model(*loaded.model, *loaded.tokenizer, path, unix_seconds(),
                                                           read_chat_template(options.chat_template_file));
  server::CompletionService completions(
      loop, *loaded.tokenizer, model,
      {.completion_max_tokens = options.completion_max_tokens, .log_requests = options.http.log_requests});
  server::HttpServer http(options.http, completions, loop, model);
  auto port = http.bind();
  if (!port) throw CommandError(port.status().message());
  const EngineMetrics metrics = loop.metrics();
  std::printf(
      "kvserve: serving '%s' (context %zu, chat template %s) on http://%s:%d with %zu %s KV blocks of %zu tokens "
      "(prefix cache %s), %zu threads%s, pid %d\n",
      model.id.c_str(), model.context_length,
      (model.chat_template.renders_model_template() ? "jinja (the model's)" : std::string(model.chat_template.name()))
          .c_str(),
      options.http.host.c_str(), *port, metrics.kv_blocks_total, kv_dtypes_name(config.kv.dtype).c_str(),
      config.kv.block_size, config.kv.prefix_caching ? "on" : "off", loaded.pool->num_threads(),
      options.http.api_key.empty() ? "" : ", API key required", static_cast<int>(::getpid()));
  std::fflush(stdout);
  if (const KvTierStack* tiers = (*engine)->kv_tiers()) {
    const size_t block = tiers->format().block_bytes;
    std::printf("kvserve: KV offload tiers: host %zu blocks (%zu bytes)", tiers->host().stats().capacity_bytes / block,
                tiers->host().stats().capacity_bytes);
    if (const DiskTier* disk = tiers->disk()) {
      const TierStats d = disk->stats();
      std::printf(", disk %s: %zu blocks (%zu bytes) of %zu found", options.tiers.disk.c_str(), d.blocks_held,
                  d.bytes_held, d.capacity_bytes);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  if (!model.chat_template.template_error().empty()) {
    std::fprintf(stderr, "kvserve: the model's chat template is not rendered (%s); chat uses the %s format\n",
                 model.chat_template.template_error().c_str(), std::string(model.chat_template.name()).c_str());
  }
  if (model.chat_template_unrecognized) {
    std::fprintf(stderr,
                 "kvserve: the model's tokenizer.chat_template is of no known family; chat uses the plain "
                 "\"User: ...\\nAssistant:\" format (docs/SERVER.md)\n");
  }
  // Shutdown: the engine loop stops first (new requests get 503; every open request gets a
  // final output), open responses finish writing, then the listener stops.
  signals.start([&] {
    loop.stop();
    if (!completions.wait_until_idle(std::chrono::seconds(5))) {
      std::fprintf(stderr, "kvserve: %zu responses still open after 5 s; closing them\n",
                   completions.active_responses());
    }
    http.stop();
  });
  const Status listened = http.listen();
  loop.stop();
  if (!listened) throw CommandError(listened.message());
  print_gpu_profile(loaded);  // --profile: the device's time per shader kind over everything served
  std::printf("kvserve: stopped\n");
  std::fflush(stdout);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat, streaming, metrics)");
  add_model_options(*cmd, options->model);
  server::HttpServerConfig& http = options->http;
  cmd->add_option("--host", http.host, "Address to listen on (loopback unless told otherwise)")->capture_default_str();
  cmd->add_option("--port", http.port, "TCP port; 0 picks a free one")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", http.api_key, "Require 'Authorization: Bearer KEY' on /v1/*")
      ->envname("KVSERVE_API_KEY");
  cmd->add_option("--http-threads", http.threads, "Connections served at once (a streaming response holds one)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-body", http.max_body_bytes, "Largest request body in bytes (larger: HTTP 413)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30))
      ->capture_default_str();
  cmd->add_flag("--log-requests", http.log_requests, "Log one line per request to stderr");
  cmd->add_option("--chat-template", options->chat_template_file,
                  "A Jinja chat template file to render chat messages with instead of the model's "
                  "tokenizer.chat_template");
  cmd->add_option(
         "--cors-origin", http.cors_origins,
         "Let web pages from this origin call the API from a browser (e.g. http://localhost:3000; '*' for any; "
         "repeat or separate with commas for several). Default: none, no CORS headers")
      ->delimiter(',')
      ->check([](const std::string& o) {
        if (o == "*" || o.starts_with("http://") || o.starts_with("https://")) return std::string();
        return "an origin is '*' or scheme://host[:port], e.g. http://localhost:3000; got '" + o + "'";
      });
  EngineConfig& engine = options->engine;
  cmd->add_option("--max-batch-tokens", engine.max_batch_tokens, "Tokens per engine step, all requests together")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--max-seqs", engine.max_seqs, "Requests running at once (more wait in a queue)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--block-size", engine.kv.block_size, "Tokens per KV block (power of two, 1..256)")
      ->capture_default_str();
  auto* kv_memory = cmd->add_option("--kv-memory", options->kv_memory,
                                    "KV pool budget, e.g. 512MiB (default: max-seqs full contexts, at most 1 GiB)");
  cmd->add_option("--kv-blocks", engine.kv.blocks, "KV pool size in blocks (instead of --kv-memory)")
      ->excludes(kv_memory);
  cmd->add_flag("!--no-prefix-cache", engine.kv.prefix_caching,
                "Do not share cached prompt prefixes across requests (each request computes its whole prompt)");
  add_kv_precision_options(*cmd, options->kv);
  add_kv_tier_options(*cmd, options->tiers);
  cmd->add_option("--default-max-tokens", options->completion_max_tokens,
                  "max_tokens of /v1/completions requests that give none")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  cmd->callback([options] { serve(*options); });
}

}  // namespace kvs::cli
