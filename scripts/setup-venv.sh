#!/usr/bin/env bash
# Create ./.venv (if missing) and install tfcluster into it with the given extras.
# Usage: scripts/setup-venv.sh worker,test
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-worker}
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
