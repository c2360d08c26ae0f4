// The KV offload tier flags of the commands that run an engine (serve, run): --kv-host SIZE (a host-memory
// tier below the pool), --kv-disk DIR with --kv-disk-size SIZE (a disk tier that keeps blocks across
// restarts), --kv-preempt (swap a preempted request to the host tier or recompute it), --kv-load-timeout-ms (the
// longest a request waits for its prefix to come up from the disk tier). kv/tiers/kv_tier_stack.h
// says what each tier does, engine/preemption.h how a preempted request is kept.
#pragma once

#include <string>

#include "cli/commands.h"
#include "engine/engine_config.h"
#include "engine/preemption.h"
#include "kv/tiers/kv_tier_stack.h"

namespace kvs::cli {

struct KvTierOptions {
  std::string host;                 // --kv-host, e.g. 4GiB; "" = none (a few blocks when there is a disk tier)
  std::string disk;                 // --kv-disk DIR
  std::string disk_size = "8GiB";   // --kv-disk-size
  std::string preempt = "auto";     // --kv-preempt auto|swap|recompute
  unsigned load_timeout_ms = 2000;  // --kv-load-timeout-ms
};

void add_kv_tier_options(CLI::App& command, KvTierOptions& options);
// Throws CommandError naming the flag and the value when a size does not parse or a flag lacks its partner.
KvTierConfig parse_kv_tier_options(const KvTierOptions& options);
KvPreemptMode parse_kv_preempt_option(const KvTierOptions& options);
// The preemption mode and the load timeout into `config`.
void apply_kv_tier_engine_options(const KvTierOptions& options, EngineConfig& config);

}  // namespace kvs::cli
