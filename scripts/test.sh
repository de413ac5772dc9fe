#!/usr/bin/env bash
# The test suite, from a fresh machine: install tfcluster with its worker and test
# extras into ./.venv, lint (ruff) and type-check (mypy) the code, bring up Docker
# and the worker image where this machine can (root with apt: installs docker.io,
# starts dockerd, builds the images), then pytest.
# TensorFlow, Docker and Slurm tests are required when CI is set (tests/helpers/required.py: a missing
# part fails them, and a run in which a group ran none fails) and skipped with a reason otherwise; CI
# starts a three-node Slurm cluster on this host for them (.ci/slurm.sh) and a one-node Kubernetes cluster for the e2e
# tests (.ci/k8s.sh, also with TFCLUSTER_K8S_SETUP=1), in the background: its cold build takes 10-35 minutes, so it
# runs beside the rest; the cluster starts once .ci/docker.sh built the worker image it loads, and the e2e tests run
# last and wait for it (tests/helpers/k8s_start.py: bounded, a failed start fails them naming the log); it
# installs Debian's chromium for the browser tests (.ci/browser.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${CI:-}" ] || [ "${TFCLUSTER_K8S_SETUP:-}" = 1 ]; then
  TFCLUSTER_K8S_START=$(mktemp -d "${TMPDIR:-/tmp}/tfcluster-k8s-start.XXXXXX")
  export TFCLUSTER_K8S_START  # the e2e tests take the namespace from its kubeconfig (tests/helpers/k8s_e2e.py)
  # in a session of its own, ended if this script fails before pytest (.ci/k8s.sh's daemons have their own sessions)
  setsid bash .ci/k8s-background.sh "$TFCLUSTER_K8S_START" &
  k8s_session=$!
  trap 'pkill -TERM -s "$k8s_session" || true' EXIT
fi
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
if [ -n "${TFCLUSTER_K8S_START:-}" ]; then
  # the start may install packages now (apt's lock is free) and loads tfcluster-worker:latest: this tree's when
  # .ci/docker.sh ran, else the one Docker has
  touch "$TFCLUSTER_K8S_START/image-built"
fi
if [ -n "${CI:-}" ] || [ "${TFCLUSTER_BROWSER_SETUP:-}" = 1 ]; then
  bash .ci/browser.sh
fi
# Two processes (pytest-xdist; TFCLUSTER_TEST_PROCESSES=0: one): each lane of tests/helpers/lanes.py runs whole in one
# of them, the e2e lane first (it waits for the cluster while the other process runs the rest).
exec python -m pytest --numprocesses "${TFCLUSTER_TEST_PROCESSES:-2}" --dist loadgroup --no-loadscope-reorder "$@"
