"""The kubeconfig's embedded key is never copied to a file (``kubeapi._in_memory_file``): the client authenticates with
it, and a ``tfcluster`` command that ends by SIGTERM or SIGHUP (a closed terminal, a dropped ssh session) leaves no
copy of it behind."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from helpers.paths import REPO
from helpers.required import unavailable
from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, connect


def key_pair(where: Path) -> tuple[bytes, bytes]:
    """A throwaway self-signed client certificate and its key (PEM), made by the openssl command."""
    if shutil.which("openssl") is None:
        unavailable("the openssl command is not installed (it makes the test's client certificate)")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(where / "key.pem"), "-out", str(where / "cert.pem"), "-subj", "/CN=tfcluster-test",
                    "-days", "1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return (where / "cert.pem").read_bytes(), (where / "key.pem").read_bytes()


def kubeconfig(server: str, cert: bytes, key: bytes) -> dict:
    def data(pem: bytes) -> str:
        return base64.b64encode(pem).decode()

    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": data(cert)}}],
            "users": [{"name": "u", "user": {"client-certificate-data": data(cert), "client-key-data": data(key)}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}]}


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("command", [["status", "run1"], ["logs", "run1", "-f"], ["watch", "run1"]], ids=" ".join)
def test_a_command_ended_by_a_signal_leaves_no_copy_of_the_kubeconfigs_key(
        tmp_path: Path, command: list[str], ending: signal.Signals) -> None:
    cert, key = key_pair(tmp_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as server:  # accepts, never answers: the TLS handshake waits
        server.settimeout(60)
        (tmp_path / "config").write_text(yaml.safe_dump(kubeconfig(f"https://127.0.0.1:{server.getsockname()[1]}",
                                                                   cert, key)))
        env = {**os.environ, "KUBECONFIG": str(tmp_path / "config"), "TMPDIR": str(temp),
               "PYTHONPATH": str(REPO)}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        process = subprocess.Popen([sys.executable, "-m", "launcher", *command, "-b", "k8s"], cwd=tmp_path, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            connection, _ = server.accept()  # the command has loaded the kubeconfig and is making its first request
            with connection:
                process.send_signal(ending)
                output = process.communicate(timeout=60)[0]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode != 0, output
    copies = [p for p in temp.rglob("*") if p.is_file() and key in p.read_bytes()]
    assert not copies, f"{command} ended by {ending.name} left copies of the key: {copies}"


class _EmptyLists(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the handler's protocol
        body = json.dumps({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(name="mutual_tls")
def mutual_tls_fixture(tmp_path: Path) -> Iterator[tuple[str, bytes, bytes]]:
    """An HTTPS server answering every GET with an empty list, to clients with the certificate it makes only."""
    cert, key = key_pair(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "cert.pem"))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmptyLists)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", cert, key
    server.shutdown()
    server.server_close()


def test_the_client_authenticates_with_the_kubeconfigs_key_kept_in_memory(
        mutual_tls: tuple[str, bytes, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, cert, key = mutual_tls
    (tmp_path / "config").write_text(yaml.safe_dump(kubeconfig(url, cert, key)))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    temp = tmp_path / "tmp"  # this process's temporary directory, seen by no other
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    api = KubeApi(connect(None))
    assert api.select(Kind.CONFIG_MAP, "ns", "a=b") == []
    assert not [p for p in temp.rglob("*") if p.is_file() and key in p.read_bytes()]
