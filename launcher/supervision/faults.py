"""Which faults of a runtime's engine the supervisor retries: the one home of 'retryable engine fault'.

Contract: ``engine_fault(exc)`` is True when ``exc``, or anything in its chain (``__cause__``,
``__context__``, exceptions a wrapper carries in its arguments), says the connection to the engine
(the Docker socket, an API server) broke, was refused or was never there: ``ConnectionError``,
``TimeoutError``, an ``OSError`` with an errno in ``CONNECTION_ERRNOS``, or a wrapper whose message
starts as in ``CONNECTION_WORDS``. The supervisor retries a round that met one, up to its
``fault_retries`` in a row (``FaultsInARow`` counts them). ``engine_fault`` is pure.
"""

from __future__ import annotations

import errno

from launcher.supervision.publisher import log, one_line

#: The operating system's errors of a connection that broke or cannot be made.
CONNECTION_ERRNOS = frozenset({
    errno.ENOTCONN, errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED, errno.EPIPE, errno.ESHUTDOWN,
    errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN,
})
#: How urllib3 and requests begin the message of an error around a broken connection.
CONNECTION_WORDS = ("Connection aborted", "Connection broken", "Connection reset", "Response ended prematurely")
#: How deep a chain is followed (a chain that loops or runs on is cut there).
DEPTH = 20


def engine_fault(exc: BaseException) -> bool:
    """True if ``exc`` is a broken, refused or missing connection to the engine (see the module contract)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending and len(seen) < DEPTH:
        fault = pending.pop()
        if id(fault) in seen:
            continue
        seen.add(id(fault))
        if isinstance(fault, (ConnectionError, TimeoutError)):
            return True
        if isinstance(fault, OSError) and fault.errno in CONNECTION_ERRNOS:
            return True
        if fault.args and isinstance(fault.args[0], str) and fault.args[0].startswith(CONNECTION_WORDS):
            return True
        pending.extend(e for e in (fault.__cause__, fault.__context__, *fault.args) if isinstance(e, BaseException))
    return False


class FaultsInARow:
    """Counts the runtime faults of consecutive rounds: ``failed(exc, doing)`` logs one and returns True once
    ``limit`` came in a row (give up); ``ok()`` starts the count again."""

    def __init__(self, limit: int):
        self.limit = limit
        self.count = 0

    def failed(self, exc: BaseException, doing: str = "") -> bool:
        self.count += 1
        log(f"runtime error{doing} ({self.count}/{self.limit}): {one_line(exc)}")
        return self.count >= self.limit

    def ok(self) -> None:
        self.count = 0
