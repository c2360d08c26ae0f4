#!/usr/bin/env bash
# What a forced sliding window costs a model trained with full attention: for every real model in
# ../shared/models, the perplexity of the held-out text with every layer windowed to W tokens
# (kvserve perplexity --kv-window W) against the full context, one Markdown row per window. Each chunk
# starts from an empty cache, so a window only matters for the positions past it.
#
#   bench/window_quality.sh [chunk_tokens] [chunks] [windows...]   (from the repository root, after make build)
set -euo pipefail
chunk=${1:-256}
chunks=${2:-16}
shift $(($# > 2 ? 2 : $#))
windows=("${@:-16 32 64 128}")
read -r -a windows <<<"${windows[*]}"
bin=${KVSERVE:-build/kvserve}
shared=${SHARED:-../shared}
text=$shared/eval/tinystories_heldout.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

perplexity() {  # model, extra flags...: the perplexity of the last line
  local model=$1
  shift
  "$bin" perplexity -m "$model" -f "$text" --chunk "$chunk" --chunks "$chunks" "$@" 2>/dev/null | tail -1 |
    sed -E 's#.*perplexity ([0-9.]+)$#\1#'
}

for dir in "$shared"/models/*/; do
  name=$(basename "$dir")
  model=$tmp/$name.gguf
  "$bin" convert --llama2c "$dir/$name.bin" --tokenizer "$shared/models/stories260K/tok512.bin" -o "$model" \
    --type f32 >/dev/null
  full=$(perplexity "$model")
  echo "### $name ($chunks chunks of $chunk tokens; full context: perplexity $full)"
  echo
  echo "| window | perplexity | vs full context |"
  echo "|---|---|---|"
  for w in "${windows[@]}"; do
    p=$(perplexity "$model" --kv-window "$w")
    echo "| $w | $p | $(awk -v p="$p" -v f="$full" 'BEGIN { printf "%+.2f%%", (p / f - 1) * 100 }') |"
  done
  echo
done
