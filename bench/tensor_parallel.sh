#!/usr/bin/env bash
# Tensor parallelism on this machine: the model whole on 1 rank (1 thread) against split over 2 ranks (1 thread
# each), in process (threads) and under mpirun (processes), the three alternating ROUNDS times, on a 12-layer,
# 768-wide Llama (110M shape, random q8_0 weights). Each run: `kvserve run` of a PROMPT-token prompt (its prefill
# tok/s) and DECODE generated tokens (decode tok/s); per rank its weight and KV bytes and the time its collectives
# (two all-reduces per layer, the logits gather) took, from the run's summary lines.
#   bench/tensor_parallel.sh    (from the repository root, after make build; on an idle machine)
set -euo pipefail
source "$(dirname "$0")/model_110m.sh"
PROMPT=${PROMPT:-512}
DECODE=${DECODE:-128}
ROUNDS=${ROUNDS:-3}
mpirun=${MPIRUN:-mpirun}
prompt=$(python3 -c "import random; random.seed(7); print(' '.join(random.choice(['the','cat','sat','on','a','mat','and','dog','ran','far']) for _ in range($PROMPT)))")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

row() {  # label, launcher (words; may be empty), run's flags (words)
  local label=$1
  # shellcheck disable=SC2086
  $2 "$bin" run -m "$model" -p "$prompt" -n "$DECODE" --temp 0 --ignore-eos $3 >/dev/null 2>"$tmp/err"
  python3 - "$label" "$tmp/err" <<'PY'
import re, sys
label, path = sys.argv[1], sys.argv[2]
text = open(path).read()
s = re.search(r"prompt (\d+) tokens.*?generated (\d+) tokens.*?prefill ([\d.]+) tok/s, decode ([\d.]+) tok/s, "
              r"KV cache (\d+) bytes.*?weights (\d+) bytes", text)
if not s:
    sys.exit(f"no summary in: {text}")
tp = re.search(r"\(this rank's\); (\d+) collectives took ([\d.]+) ms", text)
coll = f"{float(tp.group(2)):.1f} ms, {1e3 * float(tp.group(2)) / int(tp.group(1)):.0f} us each" if tp else "-"
print(f"| {label} | {s.group(1)} | {float(s.group(3)):.1f} | {s.group(2)} | {float(s.group(4)):.1f} "
      f"| {int(s.group(6)) / 2**20:.1f} | {int(s.group(5)) / 2**20:.2f} | {coll} |")
PY
}

echo "$(basename "$model"): a $PROMPT-token prompt, $DECODE tokens generated; 1 thread per rank (and 1 rank on 2 threads)"
echo
echo "| configuration | prompt tokens | prefill tok/s | generated | decode tok/s | rank 0 weights (MiB) | rank 0 KV (MiB) | rank 0 collectives |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  row "1 rank (round $round)" "" "-t 1"
  row "1 rank, 2 threads (round $round)" "" "-t 2"
  row "2 ranks in process (round $round)" "" "-t 2 --tp 2"
  row "2 ranks, mpirun (round $round)" "$mpirun --allow-run-as-root --oversubscribe -np 2" "-t 1 --tp 2"
done
