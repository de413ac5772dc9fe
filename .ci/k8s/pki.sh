#!/usr/bin/env bash
# The test cluster's PKI (called by .ci/k8s.sh): a CA and a key and certificate for each identity, and etcd's own CA
# (as kubeadm makes: etcd trusts every certificate its CA signed, so none of the Kubernetes identities, the launcher's
# among them, may be one of them). Idempotent: what exists is kept; a new CA makes every certificate it signs again.
# Keys are 0600 in a 0700 directory (root's).
#
#   pki.sh DIR NODE_IP
#
# Identities (CN / O as the API server's x509 authenticator reads them): the API server's serving certificate;
# admin (system:masters: the script's own bootstrap, never the tests'); the controller manager and the scheduler
# (their built-in ClusterRoleBindings); the API server's client to the kubelet; the node (system:node:tfcluster-node
# in system:nodes, for the Node authorizer; also the kubelet's serving certificate); CoreDNS; and the launcher,
# the tests' user, bound only to k8s/rbac-launcher.yaml's Role in the test namespace. Signed by etcd's CA: etcd's
# serving certificate (also its peer certificate) and the API server's client to etcd.
set -euo pipefail
dir=$1 node_ip=$2
mkdir -p "$dir" && chmod 700 "$dir" && cd "$dir"
umask 077
ca() {  # name CN: a CA, unless there
    [ -f "$1.crt" ] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -days 3650 -subj "/CN=$2" -out "$1.crt" 2>/dev/null
}
ca ca tfcluster-test-ca
ca etcd-ca tfcluster-test-etcd-ca
[ -f sa.key ] || { openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null; }

cert() {  # name CN O [subjectAltName: then it serves TLS too] [CA: ca]
    local name=$1 cn=$2 org=$3 alt=${4:-} ca=${5:-ca}
    # kept while its CA (not made anew since) verifies it
    [ -f "$name.crt" ] && openssl verify -CAfile "$ca.crt" "$name.crt" >/dev/null 2>&1 && return 0
    local subj="/CN=$cn" ext
    [ -n "$org" ] && subj="/O=$org$subj"
    ext=$(mktemp)
    { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"
      if [ -n "$alt" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$alt"
      else echo "extendedKeyUsage=clientAuth"; fi; } >"$ext"
    openssl req -new -newkey rsa:2048 -nodes -keyout "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 3650 -extfile "$ext" \
        -out "$name.crt" 2>/dev/null
    rm -f "$name.csr" "$ext"
}
cert apiserver kube-apiserver "" "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:10.96.0.1,IP:$node_ip"
cert admin tfcluster-test-admin system:masters
cert controller-manager system:kube-controller-manager ""
cert scheduler system:kube-scheduler ""
cert kubelet-client kube-apiserver-kubelet-client ""
cert node system:node:tfcluster-node system:nodes "DNS:tfcluster-node,DNS:localhost,IP:127.0.0.1,IP:$node_ip"
cert coredns tfcluster-coredns ""
cert launcher tfcluster-e2e-launcher ""
cert etcd etcd "" "DNS:localhost,IP:127.0.0.1" etcd-ca
cert apiserver-etcd-client kube-apiserver-etcd-client "" "" etcd-ca
chmod 644 ./*.crt sa.pub
