"""The local backend's task ports: free, distinct, and outside the range the kernel gives outgoing connections."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from launcher.backends.local import target
from launcher.backends.local.target import FIRST_PORT, LocalTarget, ephemeral_start


def test_ports_are_distinct_and_below_the_ephemeral_range() -> None:
    ports = LocalTarget.with_free_ports(8).ports
    assert len(set(ports)) == 8 and all(FIRST_PORT <= port < ephemeral_start() for port in ports), ports


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        taken.listen()
        monkeypatch.setattr(target, "FIRST_PORT", busy)
        monkeypatch.setattr(target, "ephemeral_start", lambda: busy + 3)
        monkeypatch.setattr(target.random, "randrange", lambda n: 0)  # the busy port is tried first
        ports = LocalTarget.with_free_ports(2).ports  # the next two, or the OS's where those are taken too
        assert busy not in ports and len(set(ports)) == 2, ports


def test_the_range_is_read_from_the_kernel_and_defaults_when_it_cannot_be(tmp_path: Path) -> None:
    (tmp_path / "range").write_text("40000\t60999\n")
    assert ephemeral_start(tmp_path / "range") == 40000
    assert ephemeral_start(tmp_path / "missing") == 32768
