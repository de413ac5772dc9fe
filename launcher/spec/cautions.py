"""What a valid spec asks for that tfcluster carries out but says aloud: the one home of those warnings.

Contract: ``cautions(spec)`` returns one ``Problem`` per thing a spec lets its tasks reach beyond their own run,
which the loader prints as a ``SpecWarning`` line (``warning: FILE:LINE: FIELD: ...``) from ``validate``,
``dry-run`` and ``up`` alike, and which never refuses the spec. Today: a ``hostPath`` volume in
``kubernetes.volumes``, which hands every task's pod a directory of the node it lands on; one of
``NODE_CONTROL`` (or a directory holding one: ``/``, ``/var``) hands it the node itself.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from launcher.spec.models import ClusterSpec
from launcher.spec.paths import is_within, normalized
from launcher.spec.problems import Problem

#: Node directories and files through which a pod controls the node (or every pod on it), and what they hold.
NODE_CONTROL = {
    "/etc": "the node's configuration and credentials",
    "/root": "root's home",
    "/home": "the users' homes",
    "/proc": "the node's kernel and processes",
    "/sys": "the node's kernel settings",
    "/dev": "the node's devices",
    "/boot": "the node's kernel and boot loader",
    "/run": "the node's runtime sockets (the container runtime's: root on the node)",
    "/var/run": "the node's runtime sockets (the container runtime's: root on the node)",
    "/var/lib/kubelet": "the kubelet's credentials and every pod's volumes and secrets",
    "/var/lib/docker": "every container's files",
    "/var/lib/containerd": "every container's files",
    "/var/log": "every pod's logs",
}


def cautions(spec: ClusterSpec) -> list[Problem]:
    """Every warning ``spec`` deserves (see the module contract); empty for most specs."""
    found = []
    for i, volume in enumerate(spec.kubernetes.volumes):
        source = volume.source.get("hostPath")
        path = source.get("path") if isinstance(source, dict) else None
        if isinstance(path, str):
            found.append(Problem(f"kubernetes.volumes.{i}.hostPath.path", _host_path_caution(path)))
    return found


def _host_path_caution(path: str) -> str:
    """What a pod gets from the node's ``path``: the node itself for ``/``, a ``NODE_CONTROL`` entry, what is in
    one or what holds one, else that directory of whichever node it lands on."""
    where = normalized(path)
    if where == "/":
        return ("hostPath / hands every task the node's whole filesystem: control of the node (and of every pod "
                "on it); the restricted pod security profile refuses any hostPath")
    for control, holds in NODE_CONTROL.items():
        if is_within(where, control) or PurePosixPath(control).is_relative_to(where):
            return (f"hostPath {where} hands every task {holds} ({control}): control of the node; the restricted "
                    "pod security profile refuses any hostPath")
    return (f"hostPath {where}: every task reaches {where} of whichever node it lands on, outside the run "
            "(other pods and runs may share it); the restricted pod security profile refuses any hostPath")
