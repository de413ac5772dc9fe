"""How a runtime calls a task's standby (``launcher.worker.standby``) to become the task.

Contract: a standby started with ``ON_SIGNAL`` as its first argument (a
container's: the runtime cannot hold a pipe to it) prints ``READY_LINE`` on
stdout once ``CALL_SIGNAL`` would reach its handler, and becomes the task on
that signal; a runtime calls only a standby that printed it, since the
signal's default action would end the process; given ``LOG_ENV`` (a Slurm step's
standby, whose srun cannot move its output elsewhere), once called it appends its
stdout and stderr to the file that variable names. Without ``ON_SIGNAL`` it is
called with a line on its stdin (local processes, a Kubernetes task's agent); given
``ZYGOTE_FD``, it then asks the zygote on that channel to fork the task (answers:
``forked``, then ``exited``). A runtime with a zygote (``launcher.worker.zygote``)
starts it with ``start_zygote``, makes each standby's channel with
``zygote_channel`` and signals the called standby's process group, which the
forked task joins (``GROUP_SIGNALS``).
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Sequence
from typing import Any

#: First argument of a standby called by ``CALL_SIGNAL`` instead of a line on its stdin.
ON_SIGNAL = "--on-signal"
CALL_SIGNAL = signal.SIGUSR2
READY_LINE = f"tfcluster standby: ready, becomes the task on {CALL_SIGNAL.name}"
#: Environment variable naming the file a standby called by ``CALL_SIGNAL`` appends its output to once called.
LOG_ENV = "TFCLUSTER_STANDBY_LOG"

#: Environment variable naming the fd of a local standby's channel to the zygote (``launcher.worker.zygote``), which
#: forks the task the standby becomes; unset: the standby imports and becomes the task itself.
ZYGOTE_FD = "TFCLUSTER_ZYGOTE_FD"
#: The signals a runtime sends a zygote's task through its standby's process group, which the forked task joined:
#: the standby ignores them (the task gets its own copy) but for ``STACKS_SIGNAL``, which the standby passes on.
GROUP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR2)
#: Largest request a standby sends the zygote (its argv, env, directory and process group, as JSON).
REQUEST_BYTES = 1 << 20


def forked(pid: int) -> bytes:
    """The zygote's first answer to a call: the pid of the child that became the task."""
    return f"pid {pid}".encode()


def exited(status: int) -> bytes:
    """The zygote's last answer: the child's raw wait status (``os.waitpid``)."""
    return f"exit {status}".encode()


def answer(message: bytes) -> tuple[str, int]:
    """``("pid", N)`` or ``("exit", STATUS)`` from the zygote's answer; ``("", 0)`` for end of file (it ended)."""
    kind, _, value = message.decode().partition(" ")
    return (kind, int(value)) if message else ("", 0)


def start_zygote(command: Sequence[str], **popen: Any) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """The zygote ``command``, started with its control channel's fd as its last argument and stdin from
    /dev/null (``popen``: the rest of ``subprocess.Popen``'s arguments), and the runtime's end of that channel;
    ``OSError`` if it cannot be started."""
    control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        try:
            process = subprocess.Popen([*command, str(theirs.fileno())], stdin=subprocess.DEVNULL,
                                       pass_fds=[theirs.fileno()], **popen)
        except OSError:
            control.close()
            raise
    return process, control


def zygote_channel(control: socket.socket) -> socket.socket | None:
    """A standby's end of a new channel to the zygote whose control channel is ``control`` (the other end is sent to
    the zygote, which serves its call); None if the zygote ended (the standby then imports by itself)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        try:
            socket.send_fds(control, [b"standby"], [theirs.fileno()])
        except OSError:
            ours.close()
            return None
    return ours
