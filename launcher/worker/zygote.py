"""``python -m launcher.worker.zygote FD``: one process per supervisor that imports TensorFlow once and forks the
tasks its standbys become.

Contract: ``FD`` is a ``SOCK_SEQPACKET`` socket (the control channel) on which the runtime sends, with
``SCM_RIGHTS``, one end of each standby's own channel (``launcher.protocol.standby.ZYGOTE_FD``). The zygote first
imports what the entrypoint imports (``TF_USE_LEGACY_KERAS`` set first), at the normal priority (a task's first
run waits for it), creates no TensorFlow context, then serves each call of a standby
(``launcher.worker.standby``): a request (its argv, env, working directory, process group, the time it was called,
and its standard streams as fds) gets a forked child which becomes the task exactly as the standby would have
(its own env, argv and title, streams, the standby's process group, Python's signal dispositions, fresh NumPy random state),
emits ``warm_start`` if the import was done when it was called, and runs ``python -m launcher.worker``; the zygote
answers ``pid N`` at once and ``exit STATUS`` (the raw wait status) once it reaped the child. It ends once the
control channel is closed (the supervisor ended) and it has no child and no standby's channel left open. Why: docs/architecture.md (Decisions).
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import socket
import sys
import time
import warnings

from launcher.protocol import env
from launcher.protocol.standby import REQUEST_BYTES, exited, forked
from launcher.worker.standby import ENTRYPOINT_MODULE


def main(args: list[str]) -> None:
    control = socket.socket(fileno=int(args[0]))
    os.environ.setdefault(env.LEGACY_KERAS, "1")
    started = time.monotonic()
    import launcher.worker.main  # noqa: F401  (TensorFlow and tf_keras with it)

    gc.freeze()  # what the import made is never traversed by a child's collections: they copy none of its pages
    _Zygote(control, started, time.monotonic()).serve()


class _Zygote:
    """The main thread's loop: the control channel, each standby's channel, and a pidfd per forked child."""

    def __init__(self, control: socket.socket, started: float, imported: float):
        self.started, self.imported = started, imported
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ, self._on_control)
        self.control_open = True
        self.channels = 0
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pidfd: (pid, the standby's channel)

    def serve(self) -> None:
        while self.control_open or self.channels or self.children:
            for key, _ in self.selector.select():
                key.data(key.fileobj)

    def _on_control(self, control: socket.socket) -> None:
        _, fds, _, _ = socket.recv_fds(control, 64, 1)
        if not fds:  # the supervisor ended: serve what is left, take no new standby
            self.selector.unregister(control)
            control.close()
            self.control_open = False
            return
        channel = socket.socket(fileno=fds[0])
        self.selector.register(channel, selectors.EVENT_READ, self._on_request)
        self.channels += 1

    def _on_request(self, channel: socket.socket) -> None:
        self.selector.unregister(channel)
        self.channels -= 1
        try:
            payload, fds, _, _ = socket.recv_fds(channel, REQUEST_BYTES, 3)
        except OSError:
            payload, fds = b"", []
        if not payload or len(fds) != 3:  # the standby ended uncalled (or sent nonsense): nothing to fork
            for fd in fds:
                os.close(fd)
            channel.close()
            return
        request = json.loads(payload)
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, fork() may deadlock": TF's idle
            pid = os.fork()
        if pid == 0:
            self._become(request, fds, channel)  # never returns
        for fd in fds:
            os.close(fd)
        try:
            channel.send(forked(pid))
        except OSError:
            pass  # the standby was killed meanwhile: its group (the child joined it) goes with it
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, channel)
        self.selector.register(pidfd, selectors.EVENT_READ, self._on_exit)

    def _on_exit(self, pidfd: int) -> None:
        self.selector.unregister(pidfd)
        pid, channel = self.children.pop(pidfd)
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        try:
            channel.send(exited(status))
        except OSError:
            pass  # the standby is gone (its group was killed)
        channel.close()

    def _become(self, request: dict, fds: list[int], channel: socket.socket) -> None:
        """In the forked child: the task, as the standby that asked would have become it (module contract)."""
        code = 1
        try:
            os.setpgid(0, request["pgid"])  # the zygote changed no signal disposition: the child has Python's own
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            for key in list(self.selector.get_map().values()):  # the other standbys' channels, the children's pidfds
                if isinstance(key.fileobj, socket.socket):
                    key.fileobj.close()
                else:
                    os.close(key.fd)
            self.selector.close()
            channel.close()
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            _reseed()
            if request["called"] >= self.imported:  # a standby's: TensorFlow imported ahead (not a first run's)
                from launcher.protocol import events

                events.emit(events.WarmStart(import_seconds=round(self.imported - self.started, 3),
                                             waited_seconds=round(request["called"] - self.imported, 3)),
                            os.environ.get(env.TASK_NAME, ""), sys.stdout, events.task_token())
            sys.argv = list(request["argv"])
            _set_title([sys.executable, "-m", ENTRYPOINT_MODULE, *sys.argv[1:]])
            import runpy

            runpy.run_module(ENTRYPOINT_MODULE, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except BaseException:  # noqa: BLE001  (as the interpreter reports an uncaught exception)
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)


def _set_title(argv: list[str]) -> None:
    """The task's command as the child's title (what ``ps`` shows), not the zygote's."""
    try:
        import setproctitle
    except ImportError:  # not where the zygote runs (the local backend's environment has it)
        return
    setproctitle.setproctitle(" ".join(argv))


def _reseed() -> None:
    """Fresh random state in the child, as a fresh process gets (``random`` reseeds itself after a fork; NumPy's
    global generator, seeded once at its import, does not)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


if __name__ == "__main__":
    main(sys.argv[1:])
