#!/usr/bin/env bash
# The prepared check for a machine with a real GPU and no package registry (docs/GPU.md, "On a real GPU").
#
#   scripts/gpu-check.sh pack          here, after `make build`: build/kvserve and build/kvserve_gpu_tests, the shared
#                                      libraries ldd names, and the Vulkan loader's Debian packages (libvulkan1 and
#                                      the glvnd/EGL/GLX ones NVIDIA's ICD loads) into gpu-pack.tar.xz (git-ignored)
#   scripts/gpu-check.sh run OUT_DIR   there, in the checkout with gpu-pack.tar.xz beside this script's folder: unpacks
#                                      it, makes the synthetic models there, runs `kvserve devices`, the GPU tests and
#                                      `kvserve bench --device vulkan` on each model, and writes OUT_DIR/gpu-check.json
#
# Nothing is built there. Each step has a time limit, and the whole run a budget (BUDGET_S, default 450 s, so that it
# stays under 8 minutes whatever the steps take): a step gets at most what is left of it, and a step with less than
# 10 s left is skipped (recorded as such). A step that fails or times out is recorded with its exit status and the
# run goes on. MODELS (default "1b:q8_0 1b:f16") names the synthetic presets and types to measure; DEPTHS (default
# 0,1024,4096) the decode depths. KV_BENCH=1 (with MODELS="") measures decode per KV type and MLA's forms instead
# (issue 42's benchmark).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pack=$root/gpu-pack.tar.xz

case "${1:-}" in
pack)
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/debs"
  cp "$root/build/kvserve" "$root/build/kvserve_gpu_tests" "$stage/bin/"
  # Every shared library the binaries need but the C runtime (the machine there has its own libc and loader).
  for b in "$stage"/bin/*; do
    ldd "$b" | awk '/=> \// {print $3}'
  done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | xargs -r cp -L -t "$stage/lib/"
  (cd "$stage/debs" && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null) ||
    { echo "gpu-check: apt-get download of the loader packages failed" >&2; exit 1; }
  tar -C "$stage" -cJf "$pack" bin lib debs
  rm -rf "$stage"
  echo "gpu-check: wrote $pack ($(du -h "$pack" | cut -f1))"
  ;;
run)
  out=${2:?usage: gpu-check.sh run OUT_DIR}
  mkdir -p "$out"
  work=$(mktemp -d)
  tar -C "$work" -xJf "$pack" || { echo "gpu-check: cannot unpack $pack" >&2; exit 1; }
  # The Vulkan loader: the machine's own if it has one, else the carried packages unpacked into /.
  if ! ldconfig -p | grep -q libvulkan.so.1; then
    for f in "$work"/debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [[ -z "${VK_DRIVER_FILES:-}" && -f $nvidia_icd ]]; then
    export VK_DRIVER_FILES=$nvidia_icd
    export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  fi
  export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  kvserve=$work/bin/kvserve
  steps=()  # one JSON object a step: {"step", "rc", "ms"}, or {"step", "skipped": true} past the budget
  budget=${BUDGET_S:-450}
  deadline=$(($(date +%s) + budget))
  step() {  # step NAME LIMIT_S COMMAND...: runs it with a time limit (at most what is left of the budget), output to
            # OUT_DIR/NAME.log
    local name=$1 limit=$2 start rc left
    shift 2
    left=$((deadline - $(date +%s)))
    if ((left < 10)); then
      steps+=("{\"step\": \"$name\", \"skipped\": true}")
      echo "gpu-check: $name: skipped (${left}s of the ${budget}s budget left)"
      return
    fi
    ((limit > left)) && limit=$left
    start=$(date +%s%N)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    steps+=("{\"step\": \"$name\", \"rc\": $rc, \"ms\": $((($(date +%s%N) - start) / 1000000))}")
    echo "gpu-check: $name: rc $rc"
  }
  step devices 30 "$kvserve" devices --json
  cp "$out/devices.log" "$out/devices.json"
  step gpu_tests 120 "$work/bin/kvserve_gpu_tests" --gtest_output="json:$out/gpu_tests.json"
  bench=()
  for m in ${MODELS:-1b:q8_0 1b:f16}; do
    preset=${m%%:*} type=${m##*:} file=$work/$preset-$type.gguf
    step "synth_${preset}_$type" 90 "$kvserve" synth --preset "$preset" --type "$type" --ctx 8192 -o "$file"
    step "bench_${preset}_$type" 150 "$kvserve" bench --device vulkan -m "$file" --kv-depths "${DEPTHS:-0,1024,4096}" \
      --kv-tokens 64 --reps 3 --profile --json "$out/bench_${preset}_$type.json"
    [[ -s $out/bench_${preset}_$type.json ]] && bench+=("\"$preset:$type\": $(cat "$out/bench_${preset}_$type.json")")
  done
  # KV_BENCH=1: issue 42's rows instead of the time the models above would take: decode per KV type against f16 at
  # depth (a 1B shape with a context of 16k), MLA's two forms (DeepSeek-V2-Lite's shape, 4 layers), Gemma 3's window
  # pools against one pool for all layers.
  if [[ ${KV_BENCH:-0} == 1 ]]; then
    step synth_kv_1b 90 "$kvserve" synth --preset 1b --type q8_0 --ctx 16448 -o "$work/kv-1b.gguf"
    step bench_kv_types 150 "$kvserve" bench --device vulkan -m "$work/kv-1b.gguf" --kv-types f16,int8,int4 \
      --kv-depths 0,4096,16384 --kv-tokens 32 --reps 2 --json "$out/bench_kv_types.json"
    step synth_kv_mla 90 "$kvserve" synth --preset deepseek-v2-lite --layers 4 --type q8_0 -o "$work/kv-mla.gguf"
    step bench_kv_mla 90 "$kvserve" bench --device vulkan -m "$work/kv-mla.gguf" --kv-types f16@absorbed,f16@expanded \
      --kv-depths 0,4096 --kv-tokens 32 --reps 2 --json "$out/bench_kv_mla.json"
  fi
  {
    echo "{\"date\": \"$(date -u +%FT%TZ)\", \"budget_s\": $budget,"
    echo " \"devices\": $(cat "$out/devices.json" 2>/dev/null || echo null),"
    echo " \"steps\": [$(IFS=,; echo "${steps[*]}")],"
    echo " \"bench\": {$(IFS=,; echo "${bench[*]}")}}"
  } >"$out/gpu-check.json"
  echo "gpu-check: wrote $out/gpu-check.json"
  ;;
*)
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
