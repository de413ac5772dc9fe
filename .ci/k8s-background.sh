#!/usr/bin/env bash
# scripts/test.sh's background start of the Kubernetes test cluster (under CI, or TFCLUSTER_K8S_SETUP=1), into DIR:
# builds at once (.ci/k8s.sh --build-only: at most 50 min), waits until DIR/image-built exists (test.sh makes it once
# .ci/docker.sh built the worker image of this tree, which the start loads into the node: at most an hour), then starts
# the cluster (.ci/k8s.sh: at most 15 min), with TFCLUSTER_K8S_SIM_NODES=20 simulated nodes unless told otherwise. Writes DIR/pid (this process), DIR/k8s.log (all progress and errors: its
# last line says why a start failed), DIR/exports (.ci/k8s.sh's `export` lines) and, at the end, DIR/status (the exit
# status, 0 when the cluster runs). tests/helpers/k8s_start.py waits for DIR/status.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=$1
# 20 simulated nodes (KWOK) beside the real one, for tests/e2e/test_k8s_e2e_scale.py (required in CI); a caller's
# own TFCLUSTER_K8S_SIM_NODES (0: none) is kept. The build then builds KWOK too.
export TFCLUSTER_K8S_SIM_NODES=${TFCLUSTER_K8S_SIM_NODES:-20}
echo $$ >"$dir/pid"
# This session is its own autogroup (sched(7)): CFS shares the CPU between autogroups first, so `nice` alone would
# leave the build half the host beside the tests (CI's timing flakes). The autogroup's nice makes it take what the
# tests leave. The start (short; the e2e tests wait for it) and the cluster's daemons (sessions of their own) run at
# the usual priority.
echo 19 >/proc/self/autogroup 2>/dev/null || true
exec 2>"$dir/k8s.log" </dev/null >/dev/null

step() {  # seconds what command...: the command, ended (with its process group) when it takes longer
    local seconds=$1 what=$2 code; shift 2
    timeout "$seconds" "$@"; code=$?
    [ "$code" -eq 124 ] && echo "k8s-background.sh: $what did not end within $((seconds / 60)) min" >&2
    return "$code"
}
image_built() {
    for _ in $(seq 3600); do [ -e "$dir/image-built" ] && return 0; sleep 1; done
    echo "k8s-background.sh: scripts/test.sh made no worker image (.ci/docker.sh) within an hour" >&2
    return 1
}
step 3000 "the build (.ci/k8s.sh --build-only)" bash .ci/k8s.sh --build-only &&
    image_built &&
    { echo 0 >/proc/self/autogroup 2>/dev/null || true; } &&
    step 900 "the start (.ci/k8s.sh)" bash .ci/k8s.sh >"$dir/exports"
echo $? >"$dir/status"
