# Sourced by the bench scripts that measure a server: a temporary directory ($tmp, removed at exit with the server
# stopped), start_server FLAGS... (serve $model on $PORT with FLAGS, waiting until it serves; its log in
# $tmp/server.log) and stop_server (SIGTERM, waiting: the server finishes what it does as it closes).
tmp=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

start_server() {  # flags...
  "$bin" serve -m "$model" --port "$PORT" "$@" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    grep -q "serving" "$tmp/server.log" && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$tmp/server.log" >&2
  exit 1
}

stop_server() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=
}
