#!/usr/bin/env bash
# Which MLA attention form prefills faster, by how many tokens a sequence brings to a step (--batch): a prompt of
# ~900 tokens (WORDS=700) through a DeepSeek-V2-Lite-shaped model (4 of its 27 layers: 1 dense, 3 with experts; every per-layer
# shape as released), absorbed and expanded interleaved per chunk size, REPS repetitions; prints prefill tok/s.
# Usage: bench/mla_prefill_forms.sh [MODEL] (default: writes /tmp/kvserve-bench/lite4-q4_0.gguf once)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
kvserve="${KVSERVE:-$here/build/kvserve}"
dir=/tmp/kvserve-bench
mkdir -p "$dir"
model="${1:-$dir/lite4-q4_0.gguf}"
[ -f "$model" ] || "$kvserve" synth --preset deepseek-v2-lite --layers 4 --type q4_0 --ctx 8192 -o "$model" >&2
# WORDS words of 2-4 letters (the synth vocabulary's; 700: ~900 tokens), the same every run.
WORDS="${WORDS:-700}"
prompt="$(awk -v words="$WORDS" 'BEGIN { srand(7); for (i = 0; i < words; i++) { n = 2 + int(rand() * 3); w = "";
  for (j = 0; j < n; j++) w = w sprintf("%c", 97 + int(rand() * 26)); printf "%s ", w } }')"
CHUNKS="${CHUNKS:-8 16 32 64 128 256 512}"
REPS="${REPS:-2}"
KV="${KV:-f16}"
echo "| tokens per step | absorbed tok/s | expanded tok/s | expanded / absorbed |"
echo "|---|---|---|---|"
for chunk in $CHUNKS; do
  a=(); e=()
  for rep in $(seq "$REPS"); do
    for form in absorbed expanded; do
      rate=$("$kvserve" run -m "$model" -p "$prompt" -n 1 --temp 0 --kv-dtype "$KV" --mla-form "$form" --batch "$chunk" \
        2>&1 >/dev/null | sed -n 's/.*prefill \([0-9.]*\) tok\/s.*/\1/p')
      if [ "$form" = absorbed ]; then a+=("$rate"); else e+=("$rate"); fi
    done
  done
  best() { printf '%s\n' "$@" | sort -g | tail -1; }
  ba=$(best "${a[@]}"); be=$(best "${e[@]}")
  echo "| $chunk | $ba | $be | $(awk -v x="$be" -v y="$ba" 'BEGIN { printf "%.2f", x / y }') |"
done
