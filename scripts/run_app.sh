#!/usr/bin/env bash
# Start the Streamlit app (and the local worker, when there is one) and stop them together.
# A non-loopback LATENCYLAB_HOST is refused unless sign-in ([auth] in .streamlit/secrets.toml)
# or viewer mode (LATENCYLAB_VIEWER_MODE=1) is configured; LATENCYLAB_ALLOW_OPEN=1 serves it
# anyway, with a warning. `run_app.sh --check` only makes that decision (exit 0 serve, 2 refuse).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LATENCYLAB_BIN:-.venv/bin}
HOST=${LATENCYLAB_HOST:-127.0.0.1}
PORT=${LATENCYLAB_PORT:-8501}
"$BIN/python" -m engine.settings serve-check "$HOST" || exit 2
if [[ "${1:-}" == "--check" ]]; then
  echo "LatencyLab: serving on $HOST is allowed"
  exit 0
fi
pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT
"$BIN/python" -m engine worker &
pids+=($!)
"$BIN/streamlit" run app.py --server.address "$HOST" --server.port "$PORT" &
pids+=($!)
echo "LatencyLab: http://$HOST:$PORT  (Ctrl-C stops the app and the worker)"
wait -n "${pids[@]}"
