#!/usr/bin/env bash
# `kvserve bench --weights-only` for every weight type and every ISA level of this CPU, interleaved (for each type,
# each ISA in turn, so host drift spreads over all of them), on one synthetic model shape; then a table of decode
# (tok/s, effective GB/s, fraction of the bandwidth probe taken in the same run) and 512-token prefill
# (tok/s, fraction of the FMA or int8 dot peak probed in the same run).
#
#   bench/weight_types.sh [PRESET] [OUT_DIR]      (default: 110m, build/weight-types)
#   TYPES="q8_0 q4_0" ISAS="avx2 avx512" REPS=2 bench/weight_types.sh 1b
#   LAYOUTS="file packed" TYPES="f16 bf16" bench/weight_types.sh 1b   # also as stored (--no-repack), interleaved
#
# Needs `make build`. Models are written once into OUT_DIR (K-quant quantization of a 1B shape takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-110m}
out=${2:-build/weight-types}
kvserve=${KVSERVE:-build/kvserve}
types=${TYPES:-f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl iq4_xs q4_k q5_k q6_k q4_k_m}
reps=${REPS:-2}
layouts=${LAYOUTS:-packed}
if [[ -z "${ISAS:-}" ]]; then  # every level this CPU has, best last
  ISAS="avx2"
  grep -qw avx_vnni /proc/cpuinfo && ISAS+=" avxvnni"
  grep -qw avx512f /proc/cpuinfo && ISAS+=" avx512"
fi
mkdir -p "$out"
for t in $types; do
  model="$out/$preset-$t.gguf"
  [[ -f "$model" ]] || "$kvserve" synth --preset "$preset" --type "$t" -o "$model" >&2
done
for t in $types; do
  for isa in $ISAS; do
    for layout in $layouts; do
      echo "== $preset $t $isa $layout" >&2
      flags=()
      [[ "$layout" == file ]] && flags=(--no-repack)
      "$kvserve" --isa "$isa" bench -m "$out/$preset-$t.gguf" --prefill-model none --weights-only --reps "$reps" \
        "${flags[@]}" --json "$out/$preset-$t-$isa-$layout.json" > "$out/$preset-$t-$isa-$layout.md"
    done
  done
done
python3 - "$out" "$preset" "$types" "$ISAS" "$layouts" <<'EOF'
import json, sys
out, preset, types, isas, layouts = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()
print(f"| {preset} weights | ISA | layout | decode tok/s | decode GB/s | of probe | prefill 512 tok/s | of peak (which) |")
print("|---|---|---|---|---|---|---|---|")
for t in types:
    for isa in isas:
        for layout in layouts:
            j = json.load(open(f"{out}/{preset}-{t}-{isa}-{layout}.json"))
            roof = j["details"]["roofline"]
            pre = j["details"]["prefill"]
            run = pre["runs"]["512"]
            stored = pre["model"].get("weight_layout", "?")
            print(f"| {t} | {isa} | {stored} | {j['decode_tok_s']['0']:.1f} | {roof['decode_gbs']['mean']:.1f} | "
                  f"{100 * roof['fraction']['mean']:.0f}% | {run['tok_s']['mean']:.0f} | "
                  f"{100 * run['peak_fraction']:.0f}% ({pre.get('peak', 'fp32 FMA')}) |")
EOF
