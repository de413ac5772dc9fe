"""Waiting for peer hosts to resolve, and an MWMS task for its group's leader to listen, before a multi-worker
strategy is built."""

from __future__ import annotations

import socket

import pytest

from launcher.worker.peers import LEADER_FIRST_POLL_S, LEADER_MAX_POLL_S, host_of, wait_for_leader, wait_for_peers
from launcher.worker.selection import leader_address
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


def tf_config(task: tuple[str, int], chief: bool = True) -> dict[str, object]:
    cluster = {"worker": ["w-0:2222", "w-1:2222"], **({"chief": ["c-0:2222"]} if chief else {})}
    return {"cluster": cluster, "task": {"type": task[0], "index": task[1]}}


@pytest.mark.parametrize(("config", "leader"), [
    (tf_config(("worker", 1)), "c-0:2222"),
    (tf_config(("worker", 0)), "c-0:2222"),
    (tf_config(("chief", 0)), None),  # the leader itself waits for nobody
    (tf_config(("worker", 1), chief=False), "w-0:2222"),
    (tf_config(("worker", 0), chief=False), None),
])
def test_the_leader_is_chief_0_else_worker_0_as_multi_worker_mirrored_has_it(config: dict[str, object],
                                                                              leader: str | None) -> None:
    assert leader_address(config) == leader


def test_a_leader_that_listens_is_found_at_the_first_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert wait_for_leader(f"127.0.0.1:{port}", timeout=0) is True  # timeout 0: one connection


def test_the_wait_tries_again_more_and_more_slowly_until_the_leader_listens() -> None:
    """A real port that listens only after the fifth pause; nobody listens on it before."""
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # free again, and refusing
    pauses: list[float] = []
    servers: list[socket.socket] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 5:
            servers.append(socket.create_server(("127.0.0.1", port)))

    try:
        assert wait_for_leader(f"127.0.0.1:{port}", timeout=60, pause=pause) is True
    finally:
        for server in servers:
            server.close()
    assert len(pauses) == 5 and pauses[0] == LEADER_FIRST_POLL_S
    assert all(b > a for a, b in zip(pauses, pauses[1:], strict=False)) and max(pauses) <= LEADER_MAX_POLL_S


def test_a_leader_that_never_listens_is_left_to_tensorflow_once_the_timeout_passed() -> None:
    assert wait_for_leader("127.0.0.1:1", timeout=0, accepts=lambda address: False) is False
