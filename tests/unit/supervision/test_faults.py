"""Which runtime faults the supervisor retries (``launcher.supervision.faults``): the errors the Docker SDK raises."""

from __future__ import annotations

import errno

import pytest
import requests.exceptions
import urllib3.exceptions

from launcher.supervision.faults import engine_fault


def through_the_sdk(cause: BaseException) -> BaseException:
    """How the Docker SDK raises a socket's error: requests around urllib3 around it, the cause chained too."""
    protocol = urllib3.exceptions.ProtocolError("Connection aborted.", cause)
    try:
        try:
            raise protocol from cause
        except urllib3.exceptions.ProtocolError as exc:
            raise requests.exceptions.ConnectionError(exc) from exc
    except requests.exceptions.ConnectionError as raised:
        return raised


@pytest.mark.parametrize("fault", [
    OSError(errno.ENOTCONN, "Transport endpoint is not connected"),  # the Docker socket in a compose run
    through_the_sdk(OSError(errno.ENOTCONN, "Transport endpoint is not connected")),
    through_the_sdk(ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")),
    through_the_sdk(FileNotFoundError(errno.ENOENT, "No such file or directory")),  # the socket gone: a restart
    requests.exceptions.ChunkedEncodingError(urllib3.exceptions.ProtocolError("Response ended prematurely")),
    ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
    BrokenPipeError(errno.EPIPE, "Broken pipe"),
    TimeoutError("timed out"),
], ids=["enotconn", "enotconn-sdk", "reset-sdk", "socket-gone-sdk", "cut-response", "refused", "pipe", "timeout"])
def test_a_broken_or_missing_connection_to_the_engine_is_retried(fault: BaseException) -> None:
    assert engine_fault(fault)


@pytest.mark.parametrize("fault", [
    ValueError("invalid literal"), KeyError("State"), FileNotFoundError(errno.ENOENT, "compose.yaml"),
    PermissionError(errno.EACCES, "Permission denied"), RuntimeError("Connection pool is full"),
])
def test_other_faults_are_not_engine_faults(fault: BaseException) -> None:
    assert not engine_fault(fault)


def test_a_chain_that_loops_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert not engine_fault(first)
