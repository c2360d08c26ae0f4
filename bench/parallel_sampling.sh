#!/usr/bin/env bash
# Parallel sampling against separate requests: n samples of one prompt in one request (they share the
# prompt's KV blocks), against n separate requests of that prompt sent at once, with the prefix cache
# and with --no-prefix-cache. Each configuration runs on a fresh server (its KV peak is per run),
# and the configurations alternate, `rounds` times over, so a drift of the host's speed reaches all.
# Prints, per run, loadgen's table and the KV blocks held at the peak (kvserve_kv_blocks_used_peak).
#
#   bench/parallel_sampling.sh MODEL.gguf [rounds] [samples] [prompt_tokens] [max_tokens]
#
# Run it on an idle machine: the server and the client share its cores.
set -euo pipefail
model=${1:?usage: bench/parallel_sampling.sh MODEL.gguf [rounds] [samples] [prompt_tokens] [max_tokens]}
rounds=${2:-2}
samples=${3:-8}
prompt_tokens=${4:-1000}
max_tokens=${5:-64}
bin=${KVSERVE:-build/kvserve}
port=${PORT:-18431}
url=http://127.0.0.1:$port
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() {  # label, server flags, concurrency, requests, n
  local label=$1 server_flags=$2 concurrency=$3 requests=$4 n=$5
  # shellcheck disable=SC2086
  "$bin" serve -m "$model" --port "$port" $server_flags 2>"$log" &
  local pid=$!
  for _ in $(seq 100); do
    curl -sf "$url/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  echo "== $label"
  "$bin" loadgen --url "$url" --concurrency "$concurrency" --requests "$requests" --n "$n" \
    --shared-prefix "$prompt_tokens" --question-tokens 0 --max-tokens "$max_tokens" --duration-limit 1800 --no-probe
  curl -s "$url/metrics" | awk '/^kvserve_kv_blocks_used_peak / {print "KV blocks at the peak: " $2}
                                /^kvserve_kv_copy_on_write_total / {print "copy-on-write block copies: " $2}'
  grep -o 'with [0-9]* [a-z0-9]* KV blocks of [0-9]* tokens' "$log" || true
  kill "$pid"
  wait "$pid" || true
}

for round in $(seq "$rounds"); do
  echo "### round $round"
  run "n=$samples in one request" "" 1 1 "$samples"
  run "$samples separate requests, prefix cache on" "" "$samples" "$samples" 1
  run "$samples separate requests, --no-prefix-cache" "--no-prefix-cache" "$samples" "$samples" 1
done
