#!/usr/bin/env bash
# What JSON mode (response_format json_object, `run --json-object`) and structured outputs (json_schema,
# `run --json-schema bench/person_schema.json`) cost decode on a 12-layer, 768-wide Llama (110M shape, random q8_0
# weights, a 32,000-token vocabulary; bench/model_110m.sh): runs of TOKENS generated tokens without a constraint,
# with JSON mode and with the schema, alternating, ROUNDS times, on THREADS threads; then the mask alone per state
# (build/bench_json_mode). The random model writes JSON only because the constraint makes it: seeds whose outputs
# run the whole TOKENS in both modes (a long string, closed as the budget ends) are picked first.
#   bench/json_mode.sh    (from the repository root, after make build; on an idle machine)
set -euo pipefail
source "$(dirname "$0")/model_110m.sh"
TOKENS=${TOKENS:-128}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
prompt="the cat sat on the mat"

decode() {  # run's flags -> "generated decode_tok_s"
  # shellcheck disable=SC2068
  "$bin" run -m "$model" -p "$prompt" -n "$TOKENS" --temp 1 -t "$THREADS" $@ 2>&1 >/dev/null |
    sed -n 's/.*generated \([0-9]*\) tokens.*decode \([0-9.]*\) tok\/s.*/\1 \2/p'
}

schema="$(dirname "$0")/person_schema.json"
seeds=()
for seed in $(seq 1 100); do
  read -r generated _ < <(decode --json-object --seed "$seed")
  [ "$generated" = "$TOKENS" ] || continue
  read -r generated _ < <(decode --json-schema "$schema" --seed "$seed")
  [ "$generated" = "$TOKENS" ] && seeds+=("$seed")
  [ ${#seeds[@]} -ge "$ROUNDS" ] && break
done
echo "$(basename "$model"), $TOKENS tokens a run, $THREADS threads; seeds whose outputs run $TOKENS tokens: ${seeds[*]}"
echo
echo "| round | seed | plain decode tok/s | JSON mode tok/s | schema tok/s | JSON / plain | schema / plain |"
echo "|---|---|---|---|---|---|---|"
round=0
for seed in "${seeds[@]}"; do
  round=$((round + 1))
  read -r _ plain < <(decode --ignore-eos --seed "$seed")
  read -r _ json < <(decode --json-object --seed "$seed")
  read -r _ structured < <(decode --json-schema "$schema" --seed "$seed")
  python3 -c "print(f'| $round | $seed | {$plain:.1f} | {$json:.1f} | {$structured:.1f} | {$json / $plain:.3f} | {$structured / $plain:.3f} |')"
done
echo
"$(dirname "$bin")/bench_json_mode" --benchmark_min_time=0.2 2>/dev/null | grep -E "Mask|Document"
