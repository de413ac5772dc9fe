"""Waiting for peer hosts to resolve before a multi-worker strategy is built."""

from __future__ import annotations

import socket

import pytest

from launcher.worker.peers import host_of, wait_for_peers
from launcher.worker.task_errors import PeerUnavailable


@pytest.mark.parametrize(
    ("address", "host"),
    [("c-worker-0.c:2222", "c-worker-0.c"), ("127.0.0.1:5000", "127.0.0.1"), ("[::1]:2222", "::1")],
)
def test_host_of(address: str, host: str) -> None:
    assert host_of(address) == host


def test_waits_until_every_host_resolves() -> None:
    attempts: dict[str, int] = {}

    def resolves(host: str) -> bool:  # each host appears in DNS on its third look-up
        attempts[host] = attempts.get(host, 0) + 1
        return attempts[host] >= 3

    wait_for_peers(["a:1", "b:1", "a:2"], timeout=10, resolves=resolves, poll=0)
    assert attempts == {"a": 3, "b": 3}


def test_names_the_hosts_that_never_resolve() -> None:
    with pytest.raises(PeerUnavailable, match=r"within 0s: nope-1\.invalid, nope-2\.invalid$"):
        wait_for_peers(["127.0.0.1:1", "nope-2.invalid:1", "nope-1.invalid:1"], timeout=0, poll=0)


def test_loopback_resolves_at_the_first_real_look_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default resolver asks the system's (``getaddrinfo``) once per host, and returns when each answered."""
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def recording(host: str, *args: object, **kwargs: object) -> object:
        looked_up.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", recording)
    wait_for_peers(["localhost:2223", "127.0.0.1:2222", "localhost:2224"], timeout=0)  # timeout 0: one look, or it raises
    assert looked_up == ["127.0.0.1", "localhost"]
