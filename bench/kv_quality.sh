#!/usr/bin/env bash
# The quantized-KV quality table: for every real model in ../shared/models, the perplexity of the
# held-out text and the KL divergence and top-1 agreement of each KV precision against the f32 cache
# (kvserve perplexity --kld), one Markdown row per precision.
#
#   bench/kv_quality.sh [chunk_tokens] [chunks]     (from the repository root, after make build)
set -euo pipefail
chunk=${1:-256}
chunks=${2:-16}
bin=${KVSERVE:-build/kvserve}
shared=${SHARED:-../shared}
text=$shared/eval/tinystories_heldout.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

variants=(
  "f16|--kv-dtype f16"
  "bf16|--kv-dtype bf16"
  "int8 (keys per channel)|--kv-dtype int8"
  "int8, keys per token|--kv-dtype int8 --kv-key-scales token"
  "int4 (keys per channel)|--kv-dtype int4"
  "int4, keys per channel, rotated|--kv-dtype int4 --kv-rotate-keys"
  "int4, keys per token|--kv-dtype int4 --kv-key-scales token"
  "int4, keys per token, rotated|--kv-dtype int4 --kv-key-scales token --kv-rotate-keys"
  "k int8, v int4|--kv-dtype-k int8 --kv-dtype-v int4"
  "k int4, v int8|--kv-dtype-k int4 --kv-dtype-v int8"
  "k f16, v int4|--kv-dtype-k f16 --kv-dtype-v int4"
)

for dir in "$shared"/models/*/; do
  name=$(basename "$dir")
  model=$tmp/$name.gguf
  "$bin" convert --llama2c "$dir/$name.bin" --tokenizer "$shared/models/stories260K/tok512.bin" -o "$model" \
    --type f32 >/dev/null
  echo "### $name ($chunks chunks of $chunk tokens)"
  echo
  echo "| KV | perplexity | vs f32 | mean KL divergence (nats) | max KL | top-1 agreement |"
  echo "|---|---|---|---|---|---|"
  for v in "${variants[@]}"; do
    label=${v%%|*}
    # shellcheck disable=SC2086
    line=$("$bin" perplexity -m "$model" -f "$text" --chunk "$chunk" --chunks "$chunks" ${v#*|} \
      --kld 2>/dev/null | tail -1)
    # "kv X against f32: perplexity P vs R (+D%), mean KL divergence K nats, max M, top-1 agreement A%"
    echo "$line" | sed -E "s#^kv .* against f32: perplexity ([0-9.]+) vs ([0-9.]+) \(([-+0-9.]+%)\), mean KL divergence ([-+0-9.e]+) nats, max ([-+0-9.e]+), top-1 agreement ([0-9.]+%)\$#| $label | \1 | \3 | \4 | \5 | \6 |#"
  done
  echo
done
