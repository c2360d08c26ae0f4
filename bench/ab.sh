#!/usr/bin/env bash
# An interleaved A/B of two kvserve binaries on one model, for changes that must not cost speed: per round, A then B
# (then B then A in the next round, so a drift of the host reaches both alike), `kvserve bench --weights-only`
# (prefill of 512 tokens and decode at depth 0, as tok/s) and `kvserve loadgen` against a fresh `serve` at 1 and 16
# concurrent streams (output tok/s). Prints one line per measurement and the B/A ratios of each round.
#
#   KVSERVE_A=/path/to/old/kvserve KVSERVE_B=build/kvserve bench/ab.sh [MODEL.gguf] [rounds]
#
# Default model: bench/model_110m.sh's (110M shape, q8_0). Run it on an idle machine: serve and loadgen share its cores.
set -euo pipefail
a=${KVSERVE_A:?set KVSERVE_A to the baseline binary}
b=${KVSERVE_B:-build/kvserve}
KVSERVE=$b
source "$(dirname "$0")/model_110m.sh"
model=${1:-$model}
rounds=${2:-3}
port=${PORT:-18432}
url=http://127.0.0.1:$port
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

bench() {  # binary -> "prefill decode" tok/s
  "$1" bench -m "$model" --weights-only --prefill-model none --json "$out/bench.json" >/dev/null 2>&1
  python3 -c "
import json; j = json.load(open('$out/bench.json'))
print(max(j['prefill_tok_s'].values()), j['decode_tok_s']['0'])"
}

loadgen() {  # binary -> "tok/s at 1 stream, tok/s at 16"
  "$1" serve -m "$model" --port "$port" --max-seqs 16 >"$out/serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 150); do curl -sf "$url/health" >/dev/null 2>&1 && break; sleep 0.2; done
  "$1" loadgen --url "$url" --concurrency 1,16 --requests 32 --max-tokens 64 --json "$out/loadgen.json" >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c "
import json; j = json.load(open('$out/loadgen.json'))
print(' '.join(str(l['tokens_per_second']) for l in j['levels']))"
}

for round in $(seq "$rounds"); do
  order="a b"; [ $((round % 2)) -eq 0 ] && order="b a"
  for who in $order; do
    bin=$a; [ "$who" = b ] && bin=$b
    read -r prefill decode <<<"$(bench "$bin")"
    read -r one sixteen <<<"$(loadgen "$bin")"
    echo "round $round $who: prefill $prefill decode $decode loadgen@1 $one loadgen@16 $sixteen" | tee -a "$out/lines"
  done
  python3 - "$out/lines" "$round" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    w = line.split()
    if w[1] != sys.argv[2]: continue
    rows[w[2].rstrip(':')] = [float(w[i]) for i in (4, 6, 8, 10)]
r = [b / a for a, b in zip(rows['a'], rows['b'])]
print(f"round {sys.argv[2]} B/A: prefill {r[0]:.3f} decode {r[1]:.3f} loadgen@1 {r[2]:.3f} loadgen@16 {r[3]:.3f}")
PY
done
