"""The test cluster's own safety (``.ci/k8s.sh``, which a user may run as root; issue 44), on the running cluster:
etcd answers only a TLS client with a certificate of etcd's own CA (the API server's), the registry's port only
root's processes, and what a pod sends over the bridge to the node's loopback is dropped (CVE-2020-8558's pattern).

Contract: these check the cluster ``.ci/k8s.sh`` runs on this machine (the e2e kubeconfig is its
``launcher.kubeconfig``) as root: they read its PKI and CNI configuration and put a network namespace of their own on
its pod bridge, at an address the pods never get. Elsewhere they are ``unavailable`` (required under CI, where
scripts/test.sh starts that cluster as root).
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import os
import secrets
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.k8s_e2e import kubeconfig, registry
from helpers.required import unavailable

pytestmark = pytest.mark.e2e

#: .ci/k8s.sh's state directory (its PKI, its CNI configuration, the launcher's kubeconfig).
ROOT = Path("/var/lib/tfcluster-k8s")
PKI = ROOT / "pki"
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 2379, 2380
#: Run in the namespace: connect to argv[1]:argv[2], print "connected" or the error's name.
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()
    print("connected")
except OSError as error:
    print(type(error).__name__)
"""


@pytest.fixture(autouse=True)
def _this_machines_test_cluster(_e2e_cluster: None) -> None:
    if Path(kubeconfig()).parent != ROOT:
        unavailable(f"checks .ci/k8s.sh's cluster on this machine ({ROOT}/launcher.kubeconfig), not {kubeconfig()}",
                    "e2e")
    if os.geteuid() != 0:
        unavailable("checks .ci/k8s.sh's cluster as root (its PKI; a network namespace on its pod bridge)", "e2e")


def answer(url: str, context: ssl.SSLContext | None = None) -> str:
    """The HTTP status of a GET of ``url`` ("200"), or the name of the error that ended it without one."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as response:
            return str(response.status)
    except urllib.error.HTTPError as error:
        return str(error.code)
    except (OSError, http.client.HTTPException) as error:
        return type(getattr(error, "reason", error)).__name__


def client_of(ca: str, identity: str | None) -> ssl.SSLContext:
    """TLS trusting the PKI's ``ca`` (the server's), presenting ``identity``'s certificate (None: none)."""
    context = ssl.create_default_context(cafile=str(PKI / f"{ca}.crt"))
    if identity is not None:
        context.load_cert_chain(PKI / f"{identity}.crt", PKI / f"{identity}.key")
    return context


def test_etcd_answers_only_a_tls_client_with_a_certificate_of_its_own_ca() -> None:
    health = f"https://127.0.0.1:{ETCD_CLIENT_PORT}/health"
    assert answer(health, client_of("etcd-ca", "apiserver-etcd-client")) == "200"  # the API server's identity
    refused = {
        "plain HTTP": answer(f"http://127.0.0.1:{ETCD_CLIENT_PORT}/health"),
        "TLS without a certificate": answer(health, client_of("etcd-ca", None)),
        "the launcher's certificate (the cluster's CA)": answer(health, client_of("etcd-ca", "launcher")),
        "the peer port, plain HTTP": answer(f"http://127.0.0.1:{ETCD_PEER_PORT}/members"),
        "the peer port without a certificate": answer(f"https://127.0.0.1:{ETCD_PEER_PORT}/members",
                                                      client_of("etcd-ca", None)),
    }
    assert not [how for how, status in refused.items() if status == "200"], refused


def test_a_process_of_a_user_other_than_root_gets_no_connection_to_the_registry() -> None:
    address = registry()
    if not address:
        unavailable("needs TFCLUSTER_REGISTRY: the registry .ci/k8s.sh exports", "e2e")
    url = f"http://{address}/v2/"
    assert answer(url) == "200"  # root's (Docker's daemon and the node's containerd push and pull as root)
    nobody = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                             f"{url}library/tfcluster-worker/blobs/uploads/"],
                            user="nobody", capture_output=True, text=True, timeout=60)
    assert (nobody.returncode, nobody.stdout) == (7, "000"), nobody  # curl's "could not connect": no push begins


@contextlib.contextmanager
def namespace_on_the_bridge(bridge: str, address: str, prefix: int, node: str) -> Iterator[str]:
    """A network namespace on the pod bridge at ``address``, as a pod that may configure its network (NET_ADMIN)
    makes itself: 127.0.0.0/8 routed through its interface to the node. Deleted afterwards (its veth with it)."""
    name = f"tfk8s-probe-{secrets.token_hex(3)}"
    veth = f"tfk8sp{secrets.token_hex(3)}"
    inside = ["ip", "netns", "exec", name]
    steps = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name],
        ["ip", "link", "set", veth, "master", bridge, "up"],
        [*inside, "ip", "addr", "add", f"{address}/{prefix}", "dev", "eth0"],
        [*inside, "ip", "link", "set", "eth0", "up"],
        [*inside, "sysctl", "-qw", "net.ipv4.conf.eth0.route_localnet=1"],
        [*inside, "ip", "route", "add", "127.0.0.0/8", "via", node, "dev", "eth0"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True, timeout=30)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


def connect_from(namespace: str, host: str, port: int) -> str:
    ran = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", CONNECT, host, str(port)],
                         capture_output=True, text=True, timeout=60)
    return ran.stdout.strip() or ran.stderr[-500:]


def test_what_a_pod_sends_over_the_bridge_to_the_nodes_loopback_is_dropped() -> None:
    network = json.loads((ROOT / "cni" / "net.d" / "10-tfcluster.conflist").read_text())["plugins"][0]
    pods = network["ipam"]["ranges"][0][0]
    node, prefix = pods["gateway"], int(pods["subnet"].split("/")[1])
    address = str(ipaddress.ip_address(pods["rangeEnd"]) + 1)  # beyond what the pods get
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            namespace_on_the_bridge(network["bridge"], address, prefix, node) as namespace:
        to_loopback = connect_from(namespace, "127.0.0.1", listener.getsockname()[1])
        to_node = connect_from(namespace, node, 53)  # CoreDNS on the node's address: the bridge carries it
    assert (to_node, to_loopback) == ("connected", "TimeoutError"), (to_node, to_loopback)
