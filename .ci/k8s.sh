#!/usr/bin/env bash
# Make a real one-node Kubernetes cluster run on this host for the Kubernetes tests. Standard output is only
#
#   export TFCLUSTER_REGISTRY=127.0.0.1:5000
#   export KUBECONFIG=/var/lib/tfcluster-k8s/launcher.kubeconfig      (always the last line)
#
# so that `eval "$(bash .ci/k8s.sh)"` points tfcluster and kubectl at it; progress goes to standard error.
#
# Idempotent: installs the Debian packages it needs if missing; builds the Kubernetes components (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kubectl: .ci/k8s/go.mod), CoreDNS (.ci/k8s/coredns) and crictl
# (.ci/k8s/crictl) into $TFCLUSTER_K8S_CACHE (default /var/cache/tfcluster-k8s) when missing or when their module
# changed; then starts what is not running (or runs with other flags): etcd (Debian's; TLS with client certificates
# of its own CA only), the control plane, a containerd of the node's own (Debian's, beside Docker's; CNI bridge
# `tfk8s0` 10.244.0.0/24, pods without a default route: they reach each other, the node and the API server through
# the `kubernetes` Service, nothing else; not the node's loopback listeners), the kubelet (cgroup v1, cgroupfs),
# CoreDNS on the node's address (cluster.local only), and a docker-registry on 127.0.0.1:5000 that only root's
# processes reach and the node pulls from over plain HTTP (also for Docker Hub's names; registry.k8s.io is a closed
# loopback port: the node never pulls from outside). It waits until the node is Ready and CoreDNS answers a
# headless Service's host name, and sets up what the tests use:
#   - namespace tfcluster-e2e, enforcing the `restricted` Pod Security Standard (emptied when the node starts cold:
#     what an earlier boot left there lost its processes);
#   - storage class tfcluster-local (the default; ReadWriteMany): pre-created `local` volumes on this node, bound by
#     the real PV controller (no provisioner), made anew here once released, 32 free at each start;
#   - user tfcluster-e2e-launcher (client certificate) bound only to k8s/rbac-launcher.yaml's Role there: the
#     printed KUBECONFIG is this user's, never an administrator's ($root/admin.kubeconfig is, for debugging and for
#     the e2e test that impersonates a run's supervisor);
#   - k8s/admission-policy.yaml, tfcluster's admission policy for the runs' in-cluster supervisors;
#   - PriorityClasses tfcluster-e2e-low and tfcluster-e2e-high (a run preempted by a higher one, the e2e tests);
#   - tfcluster-worker:latest (built by .ci/docker.sh) loaded into the node's containerd, as `kind load` does, and
#     pushed to the registry as Docker Hub's library/tfcluster-worker:latest (a :latest image is pulled at each start).
# With TFCLUSTER_K8S_SIM_NODES=N it also builds and starts KWOK and makes N simulated nodes (see "simulated nodes" below).
# .ci/k8s-stop.sh stops it all. `bash .ci/k8s.sh --build-only` only builds (no packages, nothing started, no output):
# scripts/test.sh runs it in the background at once under CI, beside the rest of the run.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOTOOLCHAIN=go1.27.3          # the modules' Go (the Go on PATH fetches it from the module proxy)
cache=${TFCLUSTER_K8S_CACHE:-/var/cache/tfcluster-k8s}
root=/var/lib/tfcluster-k8s         # cluster state, configs, PKI, logs
run=/run/tfcluster-k8s              # pids, the node's containerd state and socket
logs=$root/logs
pki=$root/pki
bin=$cache/bin
node=tfcluster-node
node_ip=10.244.0.1                  # the pod bridge's address: the node as pods and the API server see it
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/16
api_service_ip=10.96.0.1             # the `kubernetes` Service: the first address of the service range
bridge=tfk8s0
namespace=tfcluster-e2e
registry_port=${TFCLUSTER_K8S_REGISTRY_PORT:-5000}
registry=127.0.0.1:$registry_port
worker_image=tfcluster-worker:latest
pause_image=localhost/tfcluster-pause:3.10
# gang scheduling (KEP-4671: PodGroup of scheduling.k8s.io/v1beta1, the scheduler's GangScheduling plugin, the
# podgroup-protection controller): one gate, the same on the API server, the scheduler and the controller manager
gates=GenericWorkload=true
volumes=32                          # free local volumes in the pool at each start: a CI session's claims, with room
sim_nodes=${TFCLUSTER_K8S_SIM_NODES:-0}   # simulated (KWOK) nodes beside the real one
[[ $sim_nodes =~ ^[0-9]+$ ]] || { echo "k8s.sh: TFCLUSTER_K8S_SIM_NODES must be a number of nodes, not '$sim_nodes'" >&2; exit 2; }
started=$(date +%s)
build_only=
case ${1:-} in --build-only) build_only=1 ;; "") ;; *) echo "usage: $0 [--build-only]" >&2; exit 2 ;; esac

say() { echo "k8s.sh: $*" >&2; }
fail() { say "$*"; exit 1; }

# --- packages -------------------------------------------------------------------------------------------------
need=()
command -v etcd >/dev/null || need+=(etcd-server)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
command -v openssl >/dev/null || need+=(openssl)
command -v iptables >/dev/null || need+=(iptables)
command -v dig >/dev/null || need+=(bind9-dnsutils)
command -v docker-registry >/dev/null || need+=(docker-registry)
{ command -v cc >/dev/null && [ -f /usr/lib/x86_64-linux-gnu/libc.a ]; } || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ] && [ -z "$build_only" ]; then
    say "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v go >/dev/null || fail "needs Go >= 1.21 on PATH (it fetches go ${GOTOOLCHAIN#go} through GOTOOLCHAIN)"

# --- build (cached: rebuilt only when a module's go.mod, go.sum or source changed) ------------------------------
build() {  # module-dir "binaries" ldflags package...: into $bin unless each binary is there and $bin/.<module>.key matches
    local dir=$1 names=$2 ldflags="-s $3" key stamp missing= t0 tmp; shift 3
    stamp=$bin/.$(basename "$dir").key
    key=$(cat "$dir"/go.mod "$dir"/go.sum "$dir"/*.go <(echo "$ldflags $GOTOOLCHAIN") | sha256sum | cut -d' ' -f1)
    for name in $names; do [ -x "$bin/$name" ] || missing=1; done
    [ -z "$missing" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ] && return 0
    say "building $names (Go build cache: $(go env GOCACHE))"
    t0=$(date +%s); tmp=$(mktemp -d "$cache/build.XXXXXX")
    (cd "$dir" && nice go build -trimpath -ldflags="$ldflags" -o "$tmp/" "$@") || { rm -rf "$tmp"; fail "building $names failed"; }
    mv -f "$tmp"/* "$bin/" && rmdir "$tmp"
    echo "$key" >"$stamp"
    say "built $names in $(( $(date +%s) - t0 )) s"
}
mkdir -p "$bin"
# the version a release build stamps (hack/lib/version.sh): the components report it, kubectl and the tests read it
k8s_version=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' .ci/k8s/go.mod)
[ -n "$k8s_version" ] || fail ".ci/k8s/go.mod: no 'require k8s.io/kubernetes vX.Y.Z' line"
minor=${k8s_version#v*.}; minor=${minor%%.*}
stamp_version=
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp_version+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
build .ci/k8s "kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl" "$stamp_version" \
    k8s.io/kubernetes/cmd/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kubectl}
build .ci/k8s/coredns coredns "" .
build .ci/k8s/crictl crictl "" sigs.k8s.io/cri-tools/cmd/crictl
[ "$sim_nodes" -eq 0 ] || build .ci/k8s/kwok kwok "" sigs.k8s.io/kwok/cmd/kwok
[ -z "$build_only" ] || exit 0

# --- processes --------------------------------------------------------------------------------------------------
mkdir -p "$root" "$run" "$logs"
chmod 700 "$root"
ours() {  # pid: a process of this cluster (each command names $root)
    tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "$root"
}
alive() {  # name [command...]: its pid file names a live process of this cluster whose binary was not replaced
    local pid exe     # since (and that runs this command, when given)
    pid=$(cat "$run/$1.pid" 2>/dev/null) && ours "$pid" || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) && [[ $exe != *" (deleted)" ]] || return 1
    [ $# -eq 1 ] || [ "$(tr '\0' '\n' <"/proc/$pid/cmdline")" = "$(printf '%s\n' "${@:2}")" ]
}
stop() {  # name: the API server and the scheduler get SIGKILL (SIGTERM took 20 s or hung), the others SIGTERM
    local pid signal=TERM
    case $1 in kube-apiserver|kube-scheduler) signal=KILL ;; esac
    pid=$(cat "$run/$1.pid" 2>/dev/null) || return 0
    if ours "$pid"; then
        kill "-$signal" "$pid" 2>/dev/null || true
        for _ in $(seq 150); do [ -e "/proc/$pid" ] || break; sleep 0.2; done
    fi
    rm -f "$run/$1.pid"
}
detached() {  # command...: in a session of its own, with none of this script's open files but 0-2: a lock its caller
               # holds (`flock /tmp/k8s-e2e.lock bash .ci/k8s.sh`) ends with the script, not with the daemon
    local fd
    for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; [ "$fd" -le 2 ] || eval "exec $fd>&-"; done
    exec setsid "$@"
}
start() {  # name command... : starts it detached unless it runs; every command names $root (alive's mark)
    local name=$1; shift
    alive "$name" "$@" && return 0
    stop "$name"   # one whose binary was replaced (rebuilt) or whose command changed (this script's flags)
    say "starting $name"
    detached "$@" >>"$logs/$name.log" 2>&1 </dev/null &
    echo $! >"$run/$name.pid"
}
wait_for() {  # seconds what command... : runs the command until it succeeds; else fails with its log's last line
    local seconds=$1 what=$2 last=; shift 2
    for _ in $(seq $((seconds * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
    [ -f "$logs/$what.log" ] && last=$(tail -n1 "$logs/$what.log" | cut -c1-300) && last=" (its log's last line: $last)"
    fail "$what did not come up in $seconds s$last (logs: $logs)"
}
write() {  # path: standard input into path if it differs; status 0 when it changed
    local new; new=$(cat)
    [ "$(cat "$1" 2>/dev/null)" = "$new" ] && return 1
    printf '%s\n' "$new" >"$1"
}
restart_if_changed() {  # name path: with the file's new content on standard input
    if write "$2"; then stop "$1"; fi
}

# --- PKI, kubeconfigs -------------------------------------------------------------------------------------------
bash .ci/k8s/pki.sh "$pki" "$node_ip"
kubeconfig() {  # who namespace: a kubeconfig with the identity's certificate and key embedded
    cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: tfcluster-test
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$pki/$1.crt")
    client-key-data: $(base64 -w0 "$pki/$1.key")
contexts:
- name: tfcluster-test
  context: {cluster: tfcluster-test, user: $1, namespace: $2}
current-context: tfcluster-test
KC
}
umask 077
for who in admin controller-manager scheduler node coredns; do kubeconfig $who default | write "$root/$who.kubeconfig" || true; done
kubeconfig launcher "$namespace" | write "$root/launcher.kubeconfig" || true
umask 022
kubectl() { "$bin/kubectl" --kubeconfig "$root/admin.kubeconfig" "$@"; }

# --- the pod network: a bridge with the node's address; pods on it reach each other and the node only ------------
if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$node_ip/24" dev "$bridge"
fi
ip link set "$bridge" up
# Docker's FORWARD policy is DROP and bridged frames pass iptables (br_netfilter): let the bridge's own traffic through
iptables -C FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || iptables -I FORWARD 1 -i "$bridge" -o "$bridge" -j ACCEPT
# The one ClusterIP Service pods use is `kubernetes` (a run's supervisor pod reaches the API server through it, as
# in-cluster clients do): kube-proxy's part for it, here one DNAT rule from its address to the API server on the
# node's loopback (route_localnet lets the bridge's packets reach 127.0.0.1; nothing else gets there), and a route
# to the service range in every pod. No kube-proxy runs: no other Service has a cluster IP in the tests.
# route_localnet alone would let a pod reach every loopback listener of the node (etcd's metrics, the kubelet's
# health port, the registry: CVE-2020-8558) by sending to 127.0.0.1 over the bridge; kube-proxy's rule drops what
# arrives for 127.0.0.0/8 unless it was that DNAT (or belongs to its connection). It is in place before the sysctl:
# the kubelet adds the same rule (its KUBE-FIREWALL chain, for every interface) only once it runs, and only as long
# as its version does.
localnet_drop=(-i "$bridge" ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment tfcluster-k8s-block-localnet
               -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP)
iptables -C INPUT "${localnet_drop[@]}" 2>/dev/null || iptables -I INPUT 1 "${localnet_drop[@]}"
sysctl -qw "net.ipv4.conf.$bridge.route_localnet=1"
api_dnat=(-i "$bridge" -d "$api_service_ip/32" -p tcp --dport 443 -j DNAT --to-destination 127.0.0.1:6443)
iptables -t nat -C PREROUTING "${api_dnat[@]}" 2>/dev/null || iptables -t nat -A PREROUTING "${api_dnat[@]}"
mkdir -p "$root/cni/net.d" "$root/cni/networks"
# pods get .2 to .250: .251 to .254 stay free for a check's own address on the bridge (tests/e2e's localnet check)
write "$root/cni/net.d/10-tfcluster.conflist" <<CNI || true
{"cniVersion": "0.4.0", "name": "tfcluster", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$root/cni/networks",
            "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip", "rangeEnd": "${pod_cidr%.*}.250"}]],
            "routes": [{"dst": "$service_cidr"}]}}]}
CNI

# --- etcd and the control plane -----------------------------------------------------------------------------------
# etcd answers only TLS clients with a certificate of its own CA (the API server's; pki.sh), on the client and the
# peer port alike: whoever writes to etcd bypasses authentication, RBAC and admission. Its data does not depend on
# the listeners: a data directory of an earlier plain-HTTP start is served as it is. The metrics port is plain.
etcd_client=(--cacert "$pki/etcd-ca.crt" --cert "$pki/apiserver-etcd-client.crt" --key "$pki/apiserver-etcd-client.key")
start etcd etcd --name tfcluster-k8s --data-dir "$root/etcd" \
    --listen-client-urls https://127.0.0.1:2379 --advertise-client-urls https://127.0.0.1:2379 \
    --cert-file "$pki/etcd.crt" --key-file "$pki/etcd.key" --client-cert-auth --trusted-ca-file "$pki/etcd-ca.crt" \
    --listen-peer-urls https://127.0.0.1:2380 --initial-advertise-peer-urls https://127.0.0.1:2380 \
    --initial-cluster tfcluster-k8s=https://127.0.0.1:2380 --peer-cert-file "$pki/etcd.crt" \
    --peer-key-file "$pki/etcd.key" --peer-client-cert-auth --peer-trusted-ca-file "$pki/etcd-ca.crt" \
    --listen-metrics-urls http://127.0.0.1:2381
wait_for 30 etcd curl -fs "${etcd_client[@]}" https://127.0.0.1:2379/health

# The audit log names who sent each request (a run's supervisor is its ServiceAccount): metadata only, of the
# ServiceAccounts of the tests' namespace, nothing else; bench/bench_k8s_scale.py counts a supervisor's requests there.
cat >"$root/audit-policy.yaml" <<POLICY
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts:$namespace"]
- level: None
POLICY
start kube-apiserver "$bin/kube-apiserver" --etcd-servers=https://127.0.0.1:2379 --etcd-cafile="$pki/etcd-ca.crt" \
    --etcd-certfile="$pki/apiserver-etcd-client.crt" --etcd-keyfile="$pki/apiserver-etcd-client.key" \
    --bind-address=127.0.0.1 --secure-port=6443 --advertise-address="$node_ip" \
    --service-cluster-ip-range="$service_cidr" --authorization-mode=Node,RBAC \
    --client-ca-file="$pki/ca.crt" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --kubelet-client-certificate="$pki/kubelet-client.crt" --kubelet-client-key="$pki/kubelet-client.key" \
    --kubelet-certificate-authority="$pki/ca.crt" --kubelet-preferred-address-types=InternalIP \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --enable-admission-plugins=NodeRestriction --allow-privileged=false --profiling=false \
    --feature-gates="$gates" --runtime-config=scheduling.k8s.io/v1beta1=true \
    --audit-policy-file="$root/audit-policy.yaml" --audit-log-path="$logs/audit.log" --audit-log-format=json \
    --audit-log-maxsize=100 --audit-log-maxbackup=1
wait_for 90 kube-apiserver kubectl get --raw /readyz

# --kube-api-qps/--kube-api-burst: the Job controller and the garbage collector write a few hundred (simulated) tasks'
# Jobs and pods at 100 requests/s, as large clusters set it, not the default 20 (tests/e2e/test_k8s_e2e_scale.py)
start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$root/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$root/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$root/controller-manager.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --use-service-account-credentials=true --controllers='*,-nodeipam' --leader-elect=false \
    --bind-address=127.0.0.1 --profiling=false --feature-gates="$gates" --kube-api-qps=100 --kube-api-burst=200
start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$root/scheduler.kubeconfig" --leader-elect=false \
    --authentication-kubeconfig="$root/scheduler.kubeconfig" --authorization-kubeconfig="$root/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --profiling=false --feature-gates="$gates"

# the API server's calls to the kubelet (logs, exec, port-forward) and CoreDNS's reads
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "tfcluster-test:apiserver-kubelet"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "tfcluster-test:coredns"}
rules:
- {apiGroups: [""], resources: [services, namespaces], verbs: [list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "tfcluster-test:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "tfcluster-test:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: tfcluster-coredns}]
YAML

# --- the node: containerd (CRI) and the kubelet -------------------------------------------------------------------
mkdir -p "$root/containerd" "$run/containerd" "$root/kubelet" "$root/pod-logs"
# Where the node pulls from: the local registry, plain HTTP. Docker Hub's names (docker.io/library/...: an image named
# without a registry, tfcluster-worker:latest) resolve there too, as through a registry mirror: a `:latest` image gets
# imagePullPolicy Always, so the node asks a registry for it even when it holds the image. registry.k8s.io is a closed
# loopback port. Nothing is pulled from outside this host.
closed=http://127.0.0.1:1
for host in "$registry" docker.io registry.k8s.io; do
    mkdir -p "$root/certs.d/$host"
    server=http://$registry; [ "$host" = registry.k8s.io ] && server=$closed
    write "$root/certs.d/$host/hosts.toml" <<TOML || true
server = "$server"
[host."$server"]
  capabilities = ["pull", "resolve"]
TOML
done
restart_if_changed containerd "$root/containerd.toml" <<TOML
version = 2
root = "$root/containerd"
state = "$run/containerd"
[grpc]
  address = "$run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # this VM withholds CAP_SYS_RESOURCE: a negative oom_score_adj (-998 for a sandbox) fails runc's start
  # ("can't get final child's PID from pipe: EOF"); scores below containerd's own (0) are raised to it
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$root/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$root/certs.d"
TOML
cold=; alive containerd || cold=1   # a cold node: no process of a pod of an earlier boot is left
start containerd containerd --config "$root/containerd.toml"
ctr() { command ctr -a "$run/containerd/containerd.sock" -n k8s.io "$@"; }
# Ready when it answers: the socket's file alone may be a previous boot's (/run outlives a machine's processes
# here), and a booting containerd replaces it only once its plugins are loaded (seconds on a loaded host)
wait_for 60 containerd ctr version
write "$root/crictl.yaml" <<YAML || true
runtime-endpoint: unix://$run/containerd/containerd.sock
image-endpoint: unix://$run/containerd/containerd.sock
timeout: 30
YAML
crictl() { "$bin/crictl" --config "$root/crictl.yaml" "$@"; }
if ! ctr images ls -q | grep -qx "$pause_image"; then
    say "building the pause image from .ci/k8s/pause/pause.c"
    ctx=$(mktemp -d)
    cc -Os -static -o "$ctx/pause" .ci/k8s/pause/pause.c
    printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
    docker build -q -t "$pause_image" "$ctx" >/dev/null
    docker save "$pause_image" | ctr images import - >/dev/null
    rm -rf "$ctx"
fi

restart_if_changed kubelet "$root/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false          # this host has cgroup v1 only; the kubelet refuses it unless told
cgroupDriver: cgroupfs       # Debian's containerd 1.6 does not report its driver over CRI
containerRuntimeEndpoint: unix://$run/containerd/containerd.sock
address: $node_ip
healthzBindAddress: 127.0.0.1
clusterDomain: cluster.local
clusterDNS: [$node_ip]
resolvConf: ""               # pods get CoreDNS only: no search domain or server of this host's
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/node.crt
tlsPrivateKeyFile: $pki/node.key
podLogsDir: $root/pod-logs
failSwapOn: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
YAML
start kubelet "$bin/kubelet" --config="$root/kubelet.yaml" --kubeconfig="$root/node.kubeconfig" \
    --hostname-override="$node" --node-ip="$node_ip" --root-dir="$root/kubelet"
# the kubelet's own health first: the node's Ready condition in etcd may be a previous boot's, until it goes stale
node_ready() { curl -fs http://127.0.0.1:10248/healthz && [ "$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
wait_for 120 "node $node (Ready)" node_ready
say "node $node Ready $(( $(date +%s) - started )) s after the start"

# --- cluster DNS: CoreDNS on the node's address, cluster.local only -----------------------------------------------
restart_if_changed coredns "$root/Corefile" <<COREFILE
cluster.local:53 {
    bind $node_ip
    errors
    ready 127.0.0.1:8181
    kubernetes cluster.local {
        kubeconfig $root/coredns.kubeconfig tfcluster-test
        ttl 5
    }
}
.:53 {
    bind $node_ip
    errors
    template ANY ANY {
        rcode NXDOMAIN
    }
}
COREFILE
start coredns "$bin/coredns" -conf "$root/Corefile"
wait_for 60 "CoreDNS (ready)" curl -fs http://127.0.0.1:8181/ready
# a headless Service's host name, the form of the tasks' addresses (<task>.<cluster>), resolved through CoreDNS
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: dns-probe, namespace: kube-system}
spec: {clusterIP: None, ports: [{name: probe, port: 2222}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: dns-probe
  namespace: kube-system
  labels: {kubernetes.io/service-name: dns-probe, endpointslice.kubernetes.io/managed-by: tfcluster-test}
addressType: IPv4
ports: [{name: probe, port: 2222}]
endpoints: [{addresses: ["$node_ip"], hostname: probe}]
YAML
resolves() { [ "$(dig +short +time=1 +tries=1 @"$node_ip" probe.dns-probe.kube-system.svc.cluster.local A)" = "$node_ip" ]; }
wait_for 30 "CoreDNS (probe.dns-probe.kube-system.svc.cluster.local)" resolves

# --- what the tests use: namespace, storage, the launcher's identity ----------------------------------------------
# On a cold node the test namespace starts empty: the runs an earlier boot left there (a session stopped mid-test)
# lost their processes with it, and their Jobs would start them all again beside the tests, holding volumes. The
# namespace controller deletes what it holds (its claims' volumes are then released, and offered again below);
# force-deleted pods let it end at once, whatever their grace periods.
if [ -n "$cold" ] && kubectl get namespace "$namespace" >/dev/null 2>&1; then
    say "emptying namespace $namespace (a cold node: what an earlier boot left there)"
    kubectl delete namespace "$namespace" --wait=false >/dev/null
    kubectl delete pods --all -n "$namespace" --force --grace-period=0 >/dev/null 2>&1 || true
    kubectl wait --for=delete "namespace/$namespace" --timeout=120s >/dev/null ||
        fail "namespace $namespace was not deleted within 120 s"
fi
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: $namespace
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
    pod-security.kubernetes.io/warn: restricted
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: tfcluster-local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
---
# two priorities for the runs of tests/e2e/test_k8s_e2e_priorities.py (a cluster admin makes PriorityClasses, never the
# launcher): a low run preempted by a high one
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: tfcluster-e2e-low
value: 1000
description: "tfcluster e2e: a run a higher one may preempt"
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: tfcluster-e2e-high
value: 2000
description: "tfcluster e2e: a run that preempts a lower one"
YAML
# the Role exactly as a user applies it, in the test namespace, bound to the launcher's certificate name
rbac=$(mktemp -d)
cp k8s/rbac-launcher.yaml "$rbac/"
cat >"$rbac/kustomization.yaml" <<YAML
namespace: $namespace
resources: [rbac-launcher.yaml]
patches:
- target: {kind: RoleBinding, name: tfcluster-launcher}
  patch: '[{"op": "replace", "path": "/subjects", "value": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tfcluster-e2e-launcher"}]}]'
YAML
kubectl apply -k "$rbac" >/dev/null
rm -rf "$rbac"
# the admission policy holding each run's in-cluster supervisor to its own run, as an administrator applies it once
# (docs/security.md); the tests forge requests as a supervisor (tests/e2e/test_k8s_e2e_admission.py)
kubectl apply -f k8s/admission-policy.yaml >/dev/null

# the local volumes: $volumes free ones at least. A released one (its claim deleted) is emptied and offered again;
# one still bound (a run nobody took down, of an earlier session on this machine) is left to it, and the pool grows
free=0 i=0
while [ "$free" -lt "$volumes" ]; do
    i=$((i + 1)) && printf -v n %02d "$i"
    pv=tfcluster-local-$n dir=$root/volumes/$n
    phase=$(kubectl get pv "$pv" -o jsonpath='{.status.phase}' 2>/dev/null || true)
    case $phase in
        Available) free=$((free + 1)); continue ;;
        Bound|Pending) continue ;;
        Released|Failed) kubectl delete pv "$pv" --wait=true >/dev/null; rm -rf "$dir" ;;
    esac
    free=$((free + 1))
    mkdir -p "$dir"
    kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: $pv, labels: {tfcluster-test/pool: local}}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce, ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: tfcluster-local
  local: {path: $dir}
  nodeAffinity:
    required:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$node]}]}]
YAML
done

# --- images: the registry the node pulls from, the worker image loaded into the node -------------------------------
# Only root's connections reach the registry's port (the owner match of locally made packets): the node's containerd,
# Docker's daemon (which pushes for `docker push` and tfcluster's workspace layers) and this script. A user's own
# process (curl, a registry client) gets a reset: nobody else pushes, say, a tfcluster-worker:latest of theirs that
# the node would run. Pods do not get there either (the bridge's localnet rule above).
registry_root_only=(-o lo -d 127.0.0.1/32 -p tcp --dport "$registry_port" -m owner ! --uid-owner 0
                    -m comment --comment tfcluster-k8s-registry-root-only -j REJECT --reject-with tcp-reset)
iptables -C OUTPUT "${registry_root_only[@]}" 2>/dev/null || iptables -I OUTPUT 1 "${registry_root_only[@]}"
mkdir -p "$root/registry"
write "$root/registry.yml" <<YAML || true
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $root/registry}, delete: {enabled: true}}
http: {addr: "$registry"}
YAML
if ! curl -fs "http://$registry/v2/" >/dev/null; then
    start registry docker-registry serve "$root/registry.yml"
    wait_for 30 "docker-registry on $registry" curl -fs "http://$registry/v2/"
fi
if docker image inspect "$worker_image" >/dev/null 2>&1; then
    want=$(docker image inspect -f '{{.Id}}' "$worker_image")
    have=$(crictl inspecti -o go-template --template '{{.status.id}}' "$worker_image" 2>/dev/null || true)
    if [ "$want" != "$have" ]; then
        say "loading $worker_image into the node"
        docker save "$worker_image" | ctr images import - >/dev/null
    fi
    manifest=$(curl -fs -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
        "http://$registry/v2/library/${worker_image%:*}/manifests/${worker_image#*:}" || true)
    if [[ $manifest != *"\"$want\""* ]]; then
        say "pushing $worker_image to $registry/library (the node's Docker Hub)"
        docker tag "$worker_image" "$registry/library/$worker_image"
        docker push -q "$registry/library/$worker_image" >/dev/null
        docker rmi "$registry/library/$worker_image" >/dev/null
    fi
else
    say "no $worker_image in Docker (.ci/docker.sh builds it): not loaded into the node"
fi

# --- simulated nodes (TFCLUSTER_K8S_SIM_NODES=N): KWOK plays their kubelet against this API server -----------------
# Nodes kwok-node-0 .. kwok-node-<N-1>, labelled type=kwok and tainted kwok.x-k8s.io/node=fake:NoSchedule (no pod
# lands there unless it selects and tolerates them), each 32 CPU, 256 Gi, 110 pods. KWOK (its own module,
# .ci/k8s/kwok) manages only the nodes labelled type=kwok, with the admin's kubeconfig, and plays the Stage objects
# applied here: its node stages, `pod-ready` (a pod placed there is Running at once and stays so: no `pod-complete`),
# ours in .ci/k8s/kwok/stages (a deleted pod ends as a program on SIGTERM, 143, then goes once the Job controller
# removed its finalizer: KWOK's own pod-delete left Jobs' pods Terminating) and `pod-container-running-failed` (a pod labelled
# pod-container-running-failed.stage.kwok.x-k8s.io=true fails about a second later, with the exit code of its
# annotation pod-container-running-failed.stage.kwok.x-k8s.io/exit-code, default 1). The nodes' address is the
# node's loopback, where nothing listens on their kubelet port: a log or exec of a simulated pod fails at once.
# Declarative: a start with fewer (or without the variable, none) deletes the others and, at none, stops KWOK.
sim_label=type=kwok
sim_taint=kwok.x-k8s.io/node
if [ "$sim_nodes" -gt 0 ]; then
    stages=$(cd .ci/k8s/kwok && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize
    kubectl apply --server-side -f "$stages/crd/bases/kwok.x-k8s.io_stages.yaml" >/dev/null
    kubectl wait --for=condition=Established --timeout=60s crd/stages.kwok.x-k8s.io >/dev/null
    for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready \
                 pod/chaos/pod-container-running-failed; do
        kubectl apply --server-side -f "$stages/stage/$stage.yaml" >/dev/null
    done
    kubectl apply --server-side --force-conflicts -f .ci/k8s/kwok/stages/ >/dev/null   # ours: a deleted pod's end
    start kwok "$bin/kwok" --kubeconfig="$root/admin.kubeconfig" --enable-crds=Stage --manage-all-nodes=false \
        --manage-nodes-with-annotation-selector= --manage-nodes-with-label-selector="$sim_label" \
        --manage-single-node= --node-ip=127.0.0.1 --node-port=10247 --node-lease-duration-seconds=40 \
        --cidr=10.200.0.0/16
    for i in $(seq 0 $((sim_nodes - 1))); do
        echo "---"
        cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {node.alpha.kubernetes.io/ttl: "0", $sim_taint: fake}
  labels: {${sim_label%=*}: ${sim_label#*=}, kubernetes.io/hostname: kwok-node-$i, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
spec:
  podCIDR: 10.200.$i.0/24
  taints: [{key: $sim_taint, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
YAML
    done | kubectl apply -f - >/dev/null
    sim_ready() { [ "$(kubectl get nodes -l "$sim_label" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge "$sim_nodes" ]; }
    wait_for 120 "KWOK ($sim_nodes simulated nodes Ready)" sim_ready
fi
for extra in $(kubectl get nodes -l "$sim_label" -o name); do
    i=${extra#node/kwok-node-}   # only the nodes this script makes
    if [[ $i =~ ^[0-9]+$ ]] && [ "$i" -ge "$sim_nodes" ]; then kubectl delete "$extra" --wait=false >/dev/null; fi
done
[ "$sim_nodes" -gt 0 ] || stop kwok
[ "$sim_nodes" -eq 0 ] || say "$sim_nodes simulated nodes (KWOK) Ready, labelled $sim_label, tainted $sim_taint=fake:NoSchedule"

say "cluster ready in $(( $(date +%s) - started )) s: node $node, namespace $namespace, logs in $logs"
echo "export TFCLUSTER_REGISTRY=$registry"
echo "export KUBECONFIG=$root/launcher.kubeconfig"
