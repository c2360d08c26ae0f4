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
#   bench/kv_tiers.sh     (from the repository root, after make build; on an idle machine)
set -euo pipefail
bin=${KVSERVE:-build/kvserve}
dir=/tmp/kvserve-bench
mkdir -p "$dir"
model=${MODEL:-$dir/110m-q8.gguf}
[ -f "$model" ] || "$bin" synth --preset 110m --type q8_0 --ctx 4096 -o "$model" >&2
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
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

start_server() {  # flags...
  "$bin" serve -m "$model" --port "$PORT" --max-seqs "$CLIENTS" --kv-blocks "$BLOCKS" "$@" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 300); do
    grep -q "serving" "$tmp/server.log" && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$tmp/server.log" >&2
  exit 1
}

stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=
}

row() {  # label: runs the workload against the running server
  "$bin" loadgen --url "http://127.0.0.1:$PORT" --chat-turns "$TURNS" --conversations "$CONVS" --concurrency "$CLIENTS" \
    --message-words "$MESSAGE" --max-tokens "$REPLY" --interleave-turns --duration-limit 1200 --no-probe \
    --json "$tmp/chat.json" >"$tmp/chat.txt" 2>&1
  python3 - "$1" "$tmp/chat.json" <<'EOF'
import json, sys
label, path = sys.argv[1], sys.argv[2]
j = json.load(open(path))
turns = j["per_turn"]
prompt = sum(t["prompt_tokens"] for t in turns)
cached = sum(t["cached_tokens"] for t in turns)
generated = sum(t["completion_tokens"] for t in turns)
ok = sum(t["requests_ok"] for t in turns)
mean_p50 = sum(t["ttft_p50_s"] for t in turns) / len(turns)
print(f"| {label} | {ok} | {j['wall_seconds']:.1f} | {generated / j['wall_seconds']:.1f} | {100 * cached / prompt:.1f}% "
      f"| {1e3 * turns[0]['ttft_p50_s']:.0f} | {1e3 * turns[-1]['ttft_p50_s']:.0f} | {1e3 * mean_p50:.0f} |")
EOF
}

echo "$CONVS conversations x $TURNS turns ($MESSAGE-word messages, $REPLY-token replies), $CLIENTS at a time, turn-major;" \
  "a pool of $BLOCKS blocks; model $(basename "$model")"
echo
echo "| configuration | requests | wall s | generated tok/s | prompt tokens cached | TTFT p50 turn 1 (ms) | TTFT p50 turn $TURNS (ms) | TTFT p50, mean over turns (ms) |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  start_server
  row "none (round $round)"
  stop_server
  start_server --kv-host "$HOST"
  row "host $HOST (round $round)"
  stop_server
  rm -rf "$tmp/disk"
  start_server --kv-host "$DISK_HOST" --kv-disk "$tmp/disk" --kv-disk-size 8GiB
  row "$DISK_HOST host + disk, cold (round $round)"
  stop_server
  start_server --kv-host "$DISK_HOST" --kv-disk "$tmp/disk" --kv-disk-size 8GiB
  row "$DISK_HOST host + disk, warm restart (round $round)"
  stop_server
done
