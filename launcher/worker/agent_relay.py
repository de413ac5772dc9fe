"""One request to the agent of this container (``launcher.worker.agent``), for a supervisor that reaches the
container only through ``docker exec`` (Compose: no port is published, and the host may not route to the
containers' network).

Contract: ``python -m launcher.worker.agent_relay REQUEST`` (REQUEST: an ``agent_control`` request's JSON object
without its token) sends the request with the run's token from this container's environment (``EVENT_TOKEN``:
never on a command line, which ``ps`` on the host shows) to the agent on 127.0.0.1 at this container's
``STACKS_PORT`` (``launcher.protocol.endpoint_wire``), waits for the answer as a supervisor on the network does (a
stop's grace on top), writes the answer on stdout as it came (nothing, for a request the agent refused, or stacks
it found none of), and exits 0; one line on stderr and exit 1 when there is no answer (no agent here, or it did not
answer); 2 for a REQUEST that is no JSON object with a kind. The caller reads the answer (``launcher.protocol.stack_endpoint.stacks_of``,
``state_of_answer``). It imports the standard library and ``launcher.protocol.endpoint_wire`` only: it runs at every
restart, on a busy host, where importing pydantic took 0.25 s.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence

from launcher.protocol.endpoint_wire import LOOPBACK, MAX_REQUEST_BYTES, STACKS_PORT, answer_seconds, answer_to, connected
from launcher.protocol.env import EVENT_TOKEN

USAGE = "usage: python -m launcher.worker.agent_relay REQUEST (an agent request's JSON object, without its token)"


def relay(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[int, bytes, str]:
    """``(exit code, stdout, stderr)`` of one relayed request (see the module contract)."""
    try:
        fields = json.loads(argv[0]) if len(argv) == 1 else None
    except ValueError:
        fields = None
    if not isinstance(fields, dict) or not isinstance(fields.get("kind"), str):
        return 2, b"", USAGE
    token, port = environ.get(EVENT_TOKEN, ""), environ.get(STACKS_PORT, "")
    if not token or not port.isdigit():
        return 1, b"", "no agent here: this container has no event token or no STACKS_PORT"
    line = json.dumps({**fields, "token": token}).encode() + b"\n"
    if len(line) > MAX_REQUEST_BYTES:
        return 2, b"", USAGE
    grace = fields.get("grace_seconds", 0.0)
    conn, why = connected(LOOPBACK, int(port))
    if conn is None:
        return 1, b"", why
    with conn:
        try:
            answer = answer_to(conn, line, answer_seconds(grace if isinstance(grace, (int, float)) else 0.0))
        except OSError as exc:
            return 1, b"", f"its agent ({LOOPBACK}:{port}) did not answer {fields['kind']}: {exc.strerror or exc}"
    return 0, answer, ""


def main() -> int:
    code, out, err = relay(sys.argv[1:], os.environ)
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    if err:
        print(err, file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
