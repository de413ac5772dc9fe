#!/usr/bin/env bash
# The demo, from a fresh machine: install tfcluster with TensorFlow into ./.venv,
# then train examples/demo.yaml (chief + 2 workers, MultiWorkerMirroredStrategy)
# as local processes on loopback. No Docker, no dataset download.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh worker
export PATH="$PWD/.venv/bin:$PATH"
tfcluster dry-run examples/demo.yaml
exec tfcluster up examples/demo.yaml "$@"
