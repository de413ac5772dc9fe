#!/usr/bin/env bash
# Stop the test cluster .ci/k8s.sh started, and remove what it made on this host except its build cache
# ($TFCLUSTER_K8S_CACHE), its PKI, its logs and the node's image store (so the next start is warm):
# KWOK and its simulated nodes, the kubelet (nothing recreates pods), then every pod sandbox through CRI (crictl: containers stopped,
# their network torn down by CNI), containerd and the shims it left, CoreDNS, the control plane (the API server and
# the scheduler with SIGKILL: SIGTERM took 20 s or hung), etcd, the registry; then the mounts under its directories,
# the cluster's state (etcd's data, the kubelet's and the volumes' directories), the pod bridge and its iptables rules
# (the FORWARD rule, and those .ci/k8s.sh tags with a comment tfcluster-k8s-*: the bridge's localnet drop, the
# registry's root-only port).
# Only processes whose pid file it wrote and whose command names its state directory are signalled.
# Idempotent: stopping a stopped cluster does nothing.
set -uo pipefail

cache=${TFCLUSTER_K8S_CACHE:-/var/cache/tfcluster-k8s}
root=/var/lib/tfcluster-k8s
run=/run/tfcluster-k8s
bridge=tfk8s0
say() { echo "k8s-stop.sh: $*" >&2; }

ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$root"; }
stop() {  # name [signal]
    local pid
    pid=$(cat "$run/$1.pid" 2>/dev/null) || return 0
    if ours "$pid"; then
        say "stopping $1"
        kill "-${2:-TERM}" "$pid" 2>/dev/null
        for _ in $(seq 150); do [ -e "/proc/$pid" ] || break; sleep 0.2; done
        [ -e "/proc/$pid" ] && { say "$1 ($pid) did not end on SIG${2:-TERM}: SIGKILL"; kill -KILL "$pid" 2>/dev/null; }
    fi
    rm -f "$run/$1.pid"
}

# the simulated nodes (TFCLUSTER_K8S_SIM_NODES): KWOK first, then its nodes (kwok-node-*) while the API server answers
stop kwok
if [ -x "$cache/bin/kubectl" ] && [ -f "$root/admin.kubeconfig" ]; then
    sim=$("$cache/bin/kubectl" --kubeconfig "$root/admin.kubeconfig" --request-timeout=10s get nodes -l type=kwok -o name 2>/dev/null | grep '^node/kwok-node-[0-9]*$')
    if [ -n "$sim" ]; then
        say "deleting the simulated nodes"
        "$cache/bin/kubectl" --kubeconfig "$root/admin.kubeconfig" --request-timeout=30s delete $sim --wait=false >/dev/null ||
            say "could not delete the simulated nodes"
    fi
fi
stop kubelet
if [ -S "$run/containerd/containerd.sock" ] && [ -x "$cache/bin/crictl" ]; then
    crictl=("$cache/bin/crictl" --config "$root/crictl.yaml")
    if [ -n "$("${crictl[@]}" pods -q 2>/dev/null)" ]; then
        say "removing the node's pods"
        "${crictl[@]}" rmp --all --force >/dev/null || say "crictl rmp failed: containers may be left"
    fi
fi
stop containerd
# shims of containers that outlived containerd (they name its socket under $run)
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $run/containerd/containerd.sock" || true); do
    say "killing a shim left behind ($pid)"; kill -KILL "$pid" 2>/dev/null
done
stop coredns
stop kube-scheduler KILL
stop kube-controller-manager
stop kube-apiserver KILL
stop etcd
stop registry
# blobs no tag refers to any more (the worker image pushed again after a rebuild)
[ -f "$root/registry.yml" ] && docker-registry garbage-collect --delete-untagged "$root/registry.yml" >/dev/null 2>&1

# mounts under the cluster's directories, deepest first (volumes, pod sandboxes' shm, container roots)
grep -oE " ($root|$run)/[^ ]*" /proc/mounts | sort -r | while read -r mount; do
    umount "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || say "could not unmount $mount"
done
rm -rf "$root/etcd" "$root/kubelet" "$root/volumes" "$root/cni/networks" "$root/pod-logs" "$run"
if ip link show "$bridge" >/dev/null 2>&1; then
    say "removing the pod bridge $bridge"
    ip link delete "$bridge"
fi
while iptables -C FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null; do
    iptables -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT
done
for chain in INPUT OUTPUT; do  # the rules' specs as iptables -S prints them (their comments have no spaces)
    iptables -S "$chain" | grep -E -- '--comment "?tfcluster-k8s-' | while read -r -a rule; do
        iptables -D "${rule[@]:1}"
    done
done
# pod network namespaces are containerd's /var/run/netns/cni-*: CNI removed them with the pods; name any left
leftover=$(ls /var/run/netns 2>/dev/null | grep '^cni-' || true)
[ -n "$leftover" ] && say "network namespaces left (not ours to know for sure; remove with ip netns delete):" $leftover
say "stopped (build cache kept in $cache)"
