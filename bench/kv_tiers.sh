#!/usr/bin/env bash
# KV offload tiers under multi-turn chat with more conversations than the KV pool holds: CONVS conversations
# of TURNS turns (MESSAGE words a message, ~2 tokens a word, REPLY tokens a reply), sent turn-major (every
# conversation's first turn, then every second one, ...: loadgen --interleave-turns), CLIENTS at a time, into a
# pool of BLOCKS blocks. Each configuration is a fresh server on a 12-layer, 768-wide Llama (110M shape,
# random q8_0 weights, f16 KV: 576 KiB a block); the configurations alternate, ROUNDS times:
#   none        no tier: a conversation's evicted history is recomputed
#   host        --kv-host HOST
#   disk cold   --kv-host DISK_HOST --kv-disk on an empty directory (the host tier stages what the disk reads back)
#   disk warm   the same directory after the disk-cold server stopped: a restarted server
# Prints one Markdown row per configuration and round: wall time, generated tok/s, the share of prompt tokens
# that came from a cache, TTFT p50 of the first and the last turn and over all turns.
# Then preemption: PREEMPT_CLIENTS requests at a time, each a 16-token shared preamble and a 500-token
# question, PREEMPT_TOKENS tokens generated, into a pool of PREEMPT_BLOCKS blocks (a fraction of what they
# need), so requests are preempted and the others grow into their blocks; the configurations alternate:
#   no tier            recompute what the pool lost
#   host, recompute    --kv-preempt recompute: what the pool evicted was demoted to the host tier and comes back
#   host, swap         --kv-preempt swap: a victim's blocks (its partial last one too) are copied to the host tier
#                      at once, pinned, and loaded back: nothing is recomputed
#   host, auto         --kv-preempt auto: swap or recompute by the measured copy bandwidth and prefill rate
# The last two columns of the chat table: the disk tier's read time (on its I/O thread) and the time the engine had
# nothing to compute but those reads to wait for; the rest of the read time was hidden behind other requests' compute.
# The last: requests that waited for their prefix to come up from disk, and those whose wait ran past
# --kv-load-timeout-ms (they computed what had not arrived).
#   bench/kv_tiers.sh [chat] [preempt]    (from the repository root, after make build; on an idle machine)
#   DEVICE=vulkan MODEL=small.gguf bench/kv_tiers.sh    the pool on Vulkan device 0 (lavapipe: a small model)
set -euo pipefail
source "$(dirname "$0")/model_110m.sh"
CONVS=${CONVS:-16}
TURNS=${TURNS:-6}
MESSAGE=${MESSAGE:-60}
REPLY=${REPLY:-16}
CLIENTS=${CLIENTS:-4}
BLOCKS=${BLOCKS:-128}
HOST=${HOST:-2GiB}
DISK_HOST=${DISK_HOST:-128MiB}  # the host tier beside the disk tier: it stages what the disk reads back
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-18431}
DEVICE=${DEVICE:-cpu}  # vulkan: the pool on Vulkan device 0, GPU pool -> host tier -> disk
PREEMPT_CLIENTS=${PREEMPT_CLIENTS:-8}
PREEMPT_BLOCKS=${PREEMPT_BLOCKS:-96}
PREEMPT_TOKENS=${PREEMPT_TOKENS:-400}
PREEMPT_PROMPT=${PREEMPT_PROMPT:-100}
parts=${*:-chat preempt}
source "$(dirname "$0")/served.sh"

measure() {  # measure ROW_FUNCTION LABEL server-flags...: a fresh server, one row of the workload, stopped
  local row_function=$1 label=$2
  shift 2
  start_server --device "$DEVICE" "$@"
  "$row_function" "$label"
  stop_server
}

row() {  # label: runs the workload against the running server
  "$bin" loadgen --url "http://127.0.0.1:$PORT" --chat-turns "$TURNS" --conversations "$CONVS" --concurrency "$CLIENTS" \
    --message-words "$MESSAGE" --max-tokens "$REPLY" --interleave-turns --duration-limit 1200 --no-probe \
    --json "$tmp/chat.json" >"$tmp/chat.txt" 2>&1
  python3 - "$1" "$tmp/chat.json" "http://127.0.0.1:$PORT/metrics" <<'EOF'
import json, sys, urllib.request
label, path, url = sys.argv[1], sys.argv[2], sys.argv[3]
j = json.load(open(path))
metrics = {}
for line in urllib.request.urlopen(url).read().decode().splitlines():
    if line and not line.startswith("#"):
        name, value = line.rsplit(" ", 1)
        metrics[name] = float(value)
# Disk reads (on the disk tier's I/O thread) and the time the engine had nothing to compute but them to wait for:
# the rest was hidden behind other requests' compute.
read = metrics.get('kvserve_kv_tier_load_seconds_sum{tier="disk"}')
waited = metrics.get("kvserve_kv_load_stall_seconds_total", 0)
disk = f"{1e3 * read:.0f} | {1e3 * waited:.0f}" if read is not None else "- | -"
# Requests that waited for their prefix to come up from disk, and those whose wait timed out (they computed the rest).
waits = f"{int(metrics.get('kvserve_kv_load_waits_total', 0))} / {int(metrics.get('kvserve_kv_load_timeouts_total', 0))}"
turns = j["per_turn"]
prompt = sum(t["prompt_tokens"] for t in turns)
cached = sum(t["cached_tokens"] for t in turns)
generated = sum(t["completion_tokens"] for t in turns)
ok = sum(t["requests_ok"] for t in turns)
mean_p50 = sum(t["ttft_p50_s"] for t in turns) / len(turns)
print(f"| {label} | {ok} | {j['wall_seconds']:.1f} | {generated / j['wall_seconds']:.1f} | {100 * cached / prompt:.1f}% "
      f"| {1e3 * turns[0]['ttft_p50_s']:.0f} | {1e3 * turns[-1]['ttft_p50_s']:.0f} | {1e3 * mean_p50:.0f} | {disk} | {waits} |")
EOF
}

if [[ " $parts " == *" chat "* ]]; then
echo "$CONVS conversations x $TURNS turns ($MESSAGE-word messages, $REPLY-token replies), $CLIENTS at a time, turn-major;" \
  "a pool of $BLOCKS blocks; model $(basename "$model"), --device $DEVICE"
echo
echo "| configuration | requests | wall s | generated tok/s | prompt tokens cached | TTFT p50 turn 1 (ms) | TTFT p50 turn $TURNS (ms) | TTFT p50, mean over turns (ms) | disk reads (ms) | engine idle waiting for them (ms) | load waits / timeouts |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  measure row "none (round $round)" --max-seqs "$CLIENTS" --kv-blocks "$BLOCKS"
  measure row "host $HOST (round $round)" --max-seqs "$CLIENTS" --kv-blocks "$BLOCKS" --kv-host "$HOST"
  rm -rf "$tmp/disk"
  disk=(--max-seqs "$CLIENTS" --kv-blocks "$BLOCKS" --kv-host "$DISK_HOST" --kv-disk "$tmp/disk" --kv-disk-size 8GiB)
  measure row "$DISK_HOST host + disk, cold (round $round)" "${disk[@]}"
  measure row "$DISK_HOST host + disk, warm restart (round $round)" "${disk[@]}"
done
fi

# The preemption table: loadgen's RAG-like workload; preemptions, swaps, recomputed tokens, tokens loaded from
# the tier and the rates auto chooses by come from /metrics.
preempt_row() {  # label
  "$bin" loadgen --url "http://127.0.0.1:$PORT" --concurrency "$PREEMPT_CLIENTS" --requests "$PREEMPT_CLIENTS" \
    --shared-prefix 16 --question-tokens "$PREEMPT_PROMPT" --max-tokens "$PREEMPT_TOKENS" --duration-limit 1200 --no-probe \
    --json "$tmp/load.json" >"$tmp/load.txt" 2>&1
  python3 - "$1" "$tmp/load.json" "http://127.0.0.1:$PORT/metrics" <<'EOF'
import json, sys, urllib.request
label, path, url = sys.argv[1:4]
level = json.load(open(path))["levels"][0]
metrics = {}
for line in urllib.request.urlopen(url).read().decode().splitlines():
    if line and not line.startswith("#"):
        name, value = line.rsplit(" ", 1)
        metrics[name] = float(value)
m = lambda name: metrics.get("kvserve_" + name, 0)
# What each way cost, at the rates the engine measured: bytes copied between the pool and the host tier (in and
# out) over the copy bandwidth; tokens computed again over the prefill rate.
copied = m('kv_tier_bytes_in_total{tier="host"}') + m('kv_tier_bytes_out_total{tier="host"}')
copy_rate, prefill = m("kv_copy_bytes_per_second"), m("recompute_tokens_per_second")
recomputed = m("preempted_tokens_recomputed_total")
copy_s = f"{1e3 * copied / copy_rate:.0f}" if copy_rate else "-"
print(f"| {label} | {level['wall_seconds']:.1f} | {level['tokens_per_second']:.1f} "
      f"| {int(m('preemptions_total'))} | {int(m('preemptions_swapped_total'))} | {int(recomputed)} "
      f"| {int(m('prefix_cache_tier_hits_tokens_total'))} | {copied / 2**20:.0f} "
      f"| {f'{copy_rate / 1e9:.1f}' if copy_rate else '-'} | {prefill:.0f} | {copy_s} | {1e3 * recomputed / prefill:.0f} "
      f"| {1e3 * level['ttft_p50_s']:.0f} | {1e3 * level['ttft_p99_s']:.0f} |")
EOF
}

if [[ " $parts " == *" preempt "* ]]; then
  echo
  echo "$PREEMPT_CLIENTS requests at a time (16-token shared preamble + $PREEMPT_PROMPT tokens of its own, $PREEMPT_TOKENS generated)," \
    "a pool of $PREEMPT_BLOCKS blocks"
  echo
  echo "| configuration | wall s | generated tok/s | preemptions | swapped | tokens recomputed | tokens loaded from the tier | MiB copied to/from the host tier | copy GB/s | prefill tok/s | copies (ms) | recomputing (ms) | TTFT p50 (ms) | TTFT p99 (ms) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for round in $(seq "$ROUNDS"); do
    measure preempt_row "no tier (round $round)" --max-seqs "$PREEMPT_CLIENTS" --kv-blocks "$PREEMPT_BLOCKS"
    for mode in recompute swap auto; do
      measure preempt_row "host $HOST, $mode (round $round)" --max-seqs "$PREEMPT_CLIENTS" --kv-blocks "$PREEMPT_BLOCKS" \
        --kv-host "$HOST" --kv-preempt "$mode"
    done
  done
fi
