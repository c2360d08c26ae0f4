#!/usr/bin/env bash
# A warm restart as a new user tries it: one server with a disk tier and no --kv-host (so the host tier stages
# 8 blocks), one prompt of PROMPT token ids, stop, start again, the same prompt alone. Per round, four requests
# of that prompt, each on the server state it names:
#   cold          a fresh server with an empty disk tier: the whole prompt computed
#   pool hit      the same server again: the prompt's blocks are in the KV pool
#   warm restart  a restarted server: the blocks come up disk -> host -> pool before the request runs
#   no wait       a restarted server with --kv-load-timeout-ms 0: it computes what has not arrived (the old
#                 behaviour: the request ran before its blocks were read)
# Prints a Markdown row per request: prompt tokens, cached tokens, time to first token (streamed), and the
# server's wait for the prefix (kvserve_kv_load_wait_seconds_total).
#   bench/kv_warm_restart.sh    (from the repository root, after make build; on an idle machine)
#   DEVICE=vulkan bench/kv_warm_restart.sh    the pool on Vulkan device 0 (lavapipe here)
set -euo pipefail
source "$(dirname "$0")/model_110m.sh"
PROMPT=${PROMPT:-902}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-18432}
DEVICE=${DEVICE:-cpu}
source "$(dirname "$0")/served.sh"
serve=(--device "$DEVICE" --kv-disk "$tmp/disk" --kv-disk-size 2GiB)

request() {  # label: the prompt once, streamed; one row
  python3 - "$1" "http://127.0.0.1:$PORT" "$PROMPT" <<'EOF'
import json, sys, time, urllib.request
label, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
prompt = [3 + (i * 7919) % 30000 for i in range(n)]  # the same ids every time
body = json.dumps({"prompt": prompt, "max_tokens": 4, "temperature": 0, "stream": True,
                   "stream_options": {"include_usage": True}}).encode()
req = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
start = time.perf_counter()
ttft, usage = None, None
with urllib.request.urlopen(req) as r:
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if ttft is None and chunk.get("choices") and chunk["choices"][0].get("text") is not None:
            ttft = time.perf_counter() - start
        if chunk.get("usage"):
            usage = chunk["usage"]
metrics = {}
for line in urllib.request.urlopen(url + "/metrics").read().decode().splitlines():
    if line and not line.startswith("#"):
        name, value = line.rsplit(" ", 1)
        metrics[name] = float(value)
cached = usage["prompt_tokens_details"]["cached_tokens"]
print(f"| {label} | {usage['prompt_tokens']} | {cached} ({100 * cached / usage['prompt_tokens']:.1f}%) "
      f"| {1e3 * ttft:.0f} | {1e3 * metrics.get('kvserve_kv_load_wait_seconds_total', 0):.0f} "
      f"| {int(metrics.get('kvserve_kv_load_timeouts_total', 0))} |")
EOF
}

echo "one prompt of $PROMPT token ids, 4 generated; model $(basename "$model"), --device $DEVICE, a disk tier and no --kv-host"
echo
echo "| request | prompt tokens | cached tokens | TTFT (ms) | waited for the prefix (ms) | load timeouts |"
echo "|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  rm -rf "$tmp/disk"
  start_server "${serve[@]}"
  request "cold (round $round)"
  request "pool hit (round $round)"
  stop_server
  start_server "${serve[@]}"
  request "warm restart (round $round)"
  stop_server
  start_server "${serve[@]}" --kv-load-timeout-ms 0
  request "restart, no wait (round $round)"
  stop_server
done
