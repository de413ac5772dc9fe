#!/usr/bin/env bash
# The test suite, from a fresh machine: install tfcluster with its worker and test
# extras into ./.venv, lint (ruff) and type-check (mypy) the code, bring up Docker
# and the worker image where this machine can (root with apt: installs docker.io,
# starts dockerd, builds the images), then pytest.
# TensorFlow, Docker and Slurm tests are required when CI is set (tests/helpers/required.py: a missing
# part fails them, and a run in which a group ran none fails) and skipped with a reason otherwise; CI
# starts a three-node Slurm cluster on this host for them (.ci/slurm.sh), and installs Debian's chromium for
# the browser tests (.ci/browser.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh worker,test
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
mypy
if [ -n "${CI:-}" ] || [ "${TFCLUSTER_DOCKER_SETUP:-}" = 1 ]; then
  bash .ci/docker.sh
fi
if [ -n "${CI:-}" ] || [ "${TFCLUSTER_SLURM_SETUP:-}" = 1 ]; then
  bash .ci/slurm.sh
fi
if [ -n "${CI:-}" ] || [ "${TFCLUSTER_BROWSER_SETUP:-}" = 1 ]; then
  bash .ci/browser.sh
fi
exec python -m pytest "$@"
