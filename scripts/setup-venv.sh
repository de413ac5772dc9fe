#!/usr/bin/env bash
# Create ./.venv (if missing) and install tfcluster into it with the given extras; as root on
# Debian/Ubuntu, also TCMalloc (libtcmalloc-minimal4), which local tasks preload when the host
# has it (launcher/backends/tcmalloc.py). Elsewhere install it yourself, or tasks use glibc's malloc.
# Usage: scripts/setup-venv.sh worker,test
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-worker}
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    && ! .venv/bin/python -c 'import sys; from launcher.backends.tcmalloc import preload_env; sys.exit(not preload_env({}))'; then
  echo "setup-venv.sh: installing libtcmalloc-minimal4 (TCMalloc for the tasks)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtcmalloc-minimal4 >/dev/null
fi
