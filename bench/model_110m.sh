# Sourced by the bench scripts that run a 110M-shaped Llama: the kvserve binary ($KVSERVE or build/kvserve) and the
# model ($MODEL, or a 12-layer, 768-wide synthetic q8_0 model with a 4096-token context, written once under
# /tmp/kvserve-bench).
bin=${KVSERVE:-build/kvserve}
dir=/tmp/kvserve-bench
mkdir -p "$dir"
model=${MODEL:-$dir/110m-q8.gguf}
[ -f "$model" ] || "$bin" synth --preset 110m --type q8_0 --ctx 4096 -o "$model" >&2
