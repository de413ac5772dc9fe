"""Stacks of a task's program read inside its container with the image's py-spy, through ``docker exec``.

Contract: ``read_container_stacks(container)`` lists the processes of the
running ``container`` from inside (its pid namespace, where its init, tini,
is 1), then runs ``py-spy dump`` on each of the others with ``docker exec``
as the container's own user, the task's uid, and nothing added to the
hardening: no capability, no privilege (py-spy needs ptrace rights over a
process of its own uid, which ``cap_drop: [ALL]`` and ``no-new-privileges``
leave, as Docker's default seccomp profile does on kernels >= 4.8). Each
py-spy is killed after ``PYSPY_SECONDS`` (``timeout -s KILL`` in the
container). It returns ``(dump, why)`` as ``launcher.backends.pyspy.read_stacks``
does; an image without py-spy (one built before tfcluster shipped it, or a
user's ``--image``) gives the one line that says so. It never raises.
"""

from __future__ import annotations

from typing import Any

from launcher.backends.pyspy import PYSPY_ENV, PYSPY_SECONDS, Ran, read_stacks

#: ``timeout``'s exit codes: the command was killed (``-s KILL``), could not be run, was not found.
KILLED, NOT_RUNNABLE, NOT_FOUND = 137, 126, 127


def read_container_stacks(container: Any) -> tuple[str | None, str]:
    import docker.errors

    try:
        code, listing = container.exec_run(["ls", "/proc"])
    except docker.errors.APIError as exc:
        return None, f"docker exec failed: {exc.explanation or exc}"
    if code != 0:
        return None, f"cannot list the container's processes: {listing.decode(errors='replace').strip()}"
    pids = sorted(int(entry) for entry in listing.decode().split() if entry.isdigit() and entry != "1")
    return read_stacks(pids, lambda command: _exec(container, command))


def _exec(container: Any, command: list[str]) -> Ran | str:
    import docker.errors

    try:
        code, (out, err) = container.exec_run(["timeout", "-s", "KILL", str(PYSPY_SECONDS), *command],
                                              environment=PYSPY_ENV, demux=True)
    except docker.errors.APIError as exc:
        return f"docker exec failed: {exc.explanation or exc}"
    stdout, stderr = (out or b"").decode(errors="replace"), (err or b"").decode(errors="replace")
    if code == KILLED:
        return f"py-spy did not answer within {PYSPY_SECONDS} s"
    if code in (NOT_RUNNABLE, NOT_FOUND):
        return ("py-spy is not in the task's image (the images `tfcluster build` makes ship it): "
                f"{(stderr or stdout).strip()}")
    return Ran(code, stdout, stderr)
