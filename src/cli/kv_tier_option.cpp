#include "cli/kv_tier_option.h"

#include <fmt/format.h>

#include "core/byte_size.h"

namespace kvs::cli {

void add_kv_tier_options(CLI::App& command, KvTierOptions& options) {
  command.add_option("--kv-host", options.host,
                     "Host-memory tier below the KV pool, e.g. 4GiB: blocks the pool evicts move there and come back "
                     "on a prefix hit instead of being recomputed");
  auto* disk = command.add_option("--kv-disk", options.disk,
                                  "Disk tier directory: blocks the pool evicts are also written there (checksummed) "
                                  "and a restarted process with the same model and KV format finds them");
  command.add_option("--kv-disk-size", options.disk_size, "Byte budget of the --kv-disk tier (LRU beyond it)")
      ->needs(disk)
      ->capture_default_str();
  command
      .add_option("--kv-preempt", options.preempt,
                  "A request preempted for lack of KV blocks: swap its blocks to the --kv-host tier and back (swap), "
                  "let them go and compute what the prefix cache lost again (recompute), or whichever the measured "
                  "copy bandwidth and prefill rate say is cheaper (auto; recompute without a host tier)")
      ->check(CLI::IsMember({"auto", "swap", "recompute"}))
      ->capture_default_str();
  command
      .add_option("--kv-load-timeout-ms", options.load_timeout_ms,
                  "A request waits for its prefix to come up from the --kv-disk tier while reading is cheaper than "
                  "computing those tokens at the measured rates, until the disk goes this long without finishing a "
                  "read (other requests' steps meanwhile do not count) or the wait outlasts computing those tokens "
                  "by this much; then it runs and computes what has not arrived")
      ->needs(disk)
      ->capture_default_str();
}

KvPreemptMode parse_kv_preempt_option(const KvTierOptions& options) {
  return *kv_preempt_mode_from_name(options.preempt);  // CLI11 checked the name
}

void apply_kv_tier_engine_options(const KvTierOptions& options, EngineConfig& config) {
  config.kv_preempt = parse_kv_preempt_option(options);
  config.kv_load_timeout = std::chrono::milliseconds(options.load_timeout_ms);
}

KvTierConfig parse_kv_tier_options(const KvTierOptions& options) {
  const auto size = [](const char* flag, const std::string& text) {
    auto bytes = parse_byte_size(text);
    if (!bytes) throw CommandError(fmt::format("{} {}: {}", flag, text, bytes.status().message()));
    if (*bytes == 0) throw CommandError(fmt::format("{} {}: a tier needs room for at least one block", flag, text));
    return *bytes;
  };
  KvTierConfig config;
  if (!options.host.empty()) config.host_bytes = size("--kv-host", options.host);
  if (!options.disk.empty()) {
    config.disk_directory = options.disk;
    config.disk_bytes = size("--kv-disk-size", options.disk_size);
  }
  return config;
}

}  // namespace kvs::cli
