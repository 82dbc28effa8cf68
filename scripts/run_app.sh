#!/usr/bin/env bash
# Start the Streamlit app (and the local worker, when there is one) and stop them together.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
pids=()
cleanup() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT
"$BIN/python" -m engine worker &
pids+=($!)
"$BIN/streamlit" run app.py --server.address "${LATENCYLAB_HOST:-127.0.0.1}" --server.port "${LATENCYLAB_PORT:-8501}" &
pids+=($!)
echo "LatencyLab: http://${LATENCYLAB_HOST:-127.0.0.1}:${LATENCYLAB_PORT:-8501}  (Ctrl-C stops the app and the worker)"
wait -n "${pids[@]}"
