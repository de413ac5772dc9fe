"""Shipping the user's workspace: which files go, their digest, and building/pushing the thin layers.

Contract:
- ``scan(directory)`` lists the files that would ship (``.dockerignore``
  honoured, ``.git``, ``.venv``, ``tfcluster-runs`` and ``__pycache__`` never)
  and digests their paths, exec bits and contents, reading each file in
  chunks (bounded memory); it raises ``LaunchError`` for a missing directory.
- ``ensure_images(workspace, echo)`` builds each ``WorkspaceImage`` that the
  engine does not have yet (the tag holds the digest: an unchanged workspace
  costs one lookup) and pushes the ones marked ``push``. A build runs with
  the host's network and CA bundle, like ``tfcluster build``, so it works
  without Docker Hub. Requirements that would replace the image's TensorFlow
  stack (tensorflow*, tf-keras, tensorboard) are left out, with a line saying so;
  the others are installed against the image's packages (never shadowing them),
  importable (``PYTHONPATH``) and their scripts on ``PATH`` for any Python version
  of the image; a failing install fails the build.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from launcher.backends.images import HOST_CA_BUNDLE, docker_client
from launcher.errors import ImageBuildError, LaunchError
from launcher.plan.workspace import CONTAINER_WORKSPACE, Workspace, WorkspaceImage, WorkspaceSource

NEVER_SHIPPED = (".git", ".venv", "tfcluster-runs", "__pycache__")
REQUIREMENTS = "requirements.txt"
#: Distributions the worker image owns: a workspace's requirements never replace them.
IMAGE_OWNED = re.compile(r"^\s*(tensorflow(-cpu|-gpu|-intel)?|tf-keras|tf_keras|tensorboard)\s*($|[\[<>=!~;\s])", re.I)
CHUNK = 1 << 20

#: Where the layer installs the workspace's requirements (``pip --prefix``: what the image has is reused, never
#: shadowed) and the fixed names it gives them, so the layer works on an ``--image`` of any Python: pip puts
#: pure and platform packages under ``lib/pythonX.Y/site-packages`` (a venv, ``python:`` images),
#: ``lib64/...`` beside it (Fedora's platlib) or ``local/lib/pythonX.Y/dist-packages`` and ``local/bin``
#: (Debian's and Ubuntu's system Python, as in ``tensorflow/tensorflow`` images): ``site-packages-1`` and
#: ``-2`` link to the (at most two) dirs it filled, ``bin`` to its scripts. The image's own ``PYTHONPATH``
#: is kept after them.
PACKAGES = "/opt/workspace-packages"
LAYER_DOCKERFILE = """\
FROM {base} AS requirements
USER root
COPY build/ /tmp/ws-build/
RUN set -e; mkdir -p {packages}; cd {packages}; \\
    if [ -s /tmp/ws-build/requirements.txt ]; then \\
      if [ -s /tmp/ws-build/ca.crt ]; then export PIP_CERT=/tmp/ws-build/ca.crt; fi; \\
      python -m pip install --no-cache-dir --disable-pip-version-check -q --prefix {packages} \\
        -r /tmp/ws-build/requirements.txt; \\
    fi; \\
    n=0; for site in lib/python*/site-packages lib64/python*/site-packages local/lib/python*/dist-packages \\
                     local/lib64/python*/dist-packages lib/python*/dist-packages; do \\
      if [ -d "$site" ]; then n=$((n + 1)); ln -s "$site" "site-packages-$n"; fi; \\
    done; \\
    if [ -d local/bin ]; then ln -s local/bin bin; fi; \\
    mkdir -p site-packages-1 site-packages-2 bin

FROM {base}
COPY --from=requirements {packages} {packages}
COPY --chown=1000:1000 workspace/ {workdir}/
ENV PYTHONPATH={packages}/site-packages-1:{packages}/site-packages-2${{PYTHONPATH:+:$PYTHONPATH}} \\
    PATH={packages}/bin:$PATH
WORKDIR {workdir}
"""


def _pattern(line: str) -> tuple[re.Pattern[str], bool] | None:
    """A ``.dockerignore`` line as (regex over the relative path, is-exception)."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    exception = line.startswith("!")
    body = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
    regex = ""
    i = 0
    while i < len(body):
        if body.startswith("**/", i):  # any directories, none too: ``**/x`` matches a top-level ``x``
            regex += "(.*/)?"
            i += 3
        elif body.startswith("**", i):
            regex += ".*"
            i += 2
        elif body[i] == "*":
            regex += "[^/]*"
            i += 1
        elif body[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(body[i])
            i += 1
    return re.compile(f"^{regex}(/.*)?$"), exception


def _ignored(relative: str, patterns: list[tuple[re.Pattern[str], bool]]) -> bool:
    """Docker's rule: the last matching pattern decides; a pattern matching a parent matches the path."""
    ignored = False
    for regex, exception in patterns:
        if regex.match(relative):
            ignored = not exception
    return ignored


def _patterns(directory: Path) -> list[tuple[re.Pattern[str], bool]]:
    ignore_file = directory / ".dockerignore"
    return [p for p in map(_pattern, ignore_file.read_text().splitlines()) if p] if ignore_file.is_file() else []


def shipped_files(directory: Path) -> Iterator[tuple[str, Path]]:
    """(relative posix path, path) of every regular file that ships, in a stable order: not under (nor
    itself) a ``NEVER_SHIPPED`` name (a ``.git`` file of a worktree too), not ignored by ``.dockerignore``."""
    patterns = _patterns(directory)
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in NEVER_SHIPPED)
        for name in sorted(f for f in files if f not in NEVER_SHIPPED):
            path = Path(root) / name
            relative = path.relative_to(directory).as_posix()
            if path.is_file() and not path.is_symlink() and not _ignored(relative, patterns):
                yield relative, path


def script_problem(directory: Path, script: str, shipped: bool, own_image: bool = False) -> str | None:
    """Why the tasks cannot run ``script`` from the workspace ``directory``, or None.

    Processes (not ``shipped``) run it in place: it must be a file there.
    Containers (``shipped``) run the workspace layer: a relative ``script``
    must be one of the ``shipped_files``; an absolute one names a file of
    the image, which only an image of the user's (``own_image``) may hold
    (not checked), never a path into ``directory`` on this machine.
    """
    if shipped and Path(script).is_absolute():
        return _absolute_script_problem(directory, script, own_image)
    if not (directory / script).is_file():
        return f"{script}: no such file in the workspace {directory}"
    if not shipped:
        return None
    relative = Path(os.path.normpath(script)).as_posix()
    if relative.startswith("../"):
        return f"{script}: outside the workspace {directory}, which is all that ships to the tasks"
    if not any(relative == name for name, _ in shipped_files(directory)):
        return (f"{script}: left out of the workspace image (.dockerignore, one of {', '.join(NEVER_SHIPPED)}, "
                "or a symbolic link)")
    return None


def _absolute_script_problem(directory: Path, script: str, own_image: bool) -> str | None:
    path = Path(script).resolve()
    if path.is_relative_to(directory):
        return (f"{script}: a path on this machine; the tasks have the workspace at {CONTAINER_WORKSPACE}: "
                f"give the script relative to it ({path.relative_to(directory).as_posix()})")
    if own_image:
        return None
    return f"{script}: outside the workspace {directory}, which is all that ships to the tasks"


def scan(directory: str | Path, contents: bool = True) -> WorkspaceSource:
    """The workspace at ``directory`` (relative to the current directory) as the planner takes it; without
    ``contents`` (processes run it in place: nothing ships) only the directory is resolved and checked."""
    root = Path(directory).resolve()
    if not root.is_dir():
        raise LaunchError(f"workspace {directory!r} is not a directory ({root})")
    if not contents:
        return WorkspaceSource(directory=str(root), digest="", files=0)
    digest = hashlib.sha256()
    count = 0
    for relative, path in shipped_files(root):
        digest.update(f"{relative}\0{os.access(path, os.X_OK)}\0".encode())
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
        digest.update(b"\0")
        count += 1
    return WorkspaceSource(directory=str(root), digest=digest.hexdigest(), files=count)


def _requirements(root: Path, echo: Callable[[str], None]) -> bytes:
    path = root / REQUIREMENTS
    if not path.is_file():
        return b""
    kept = []
    for line in path.read_text().splitlines():
        if IMAGE_OWNED.match(line):
            echo(f"workspace: {REQUIREMENTS}: skipping {line.strip()!r}: the image's TensorFlow stack is used")
        else:
            kept.append(line)
    return ("\n".join(kept) + "\n").encode()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def layer_context(image: WorkspaceImage, source: WorkspaceSource, ca_bundle: Path | None, echo: Callable[[str], None]) -> IO[bytes]:
    """The build context of one layer, spooled to disk past 64 MiB (a workspace may be large)."""
    root = Path(source.directory)
    context = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    with tarfile.open(fileobj=context, mode="w") as tar:
        _add(tar, "Dockerfile", LAYER_DOCKERFILE.format(base=image.base, packages=PACKAGES, workdir=CONTAINER_WORKSPACE).encode())
        _add(tar, "build/requirements.txt", _requirements(root, echo))
        _add(tar, "build/ca.crt", ca_bundle.read_bytes() if ca_bundle else b"")
        directory = tarfile.TarInfo("workspace")
        directory.type, directory.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(directory)  # COPY needs it even for an empty workspace
        for relative, path in shipped_files(root):
            info = tar.gettarinfo(str(path), arcname=f"workspace/{relative}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    context.seek(0)
    return context


def _exists(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_layer(client: Any, image: WorkspaceImage, source: WorkspaceSource, echo: Callable[[str], None]) -> None:
    ca = HOST_CA_BUNDLE if HOST_CA_BUNDLE.is_file() else None
    stream = client.api.build(fileobj=layer_context(image, source, ca, echo), custom_context=True, tag=image.tag,
                              network_mode="host", rm=True, forcerm=True, decode=True)
    for chunk in stream:
        if "error" in chunk:
            raise ImageBuildError(f"building the workspace image {image.tag} failed: {chunk['error'].strip()}")
        text = chunk.get("stream", "").strip()
        if text:
            echo(text)


def push(client: Any, tag: str, echo: Callable[[str], None]) -> None:
    repository, _, version = tag.rpartition(":")
    for chunk in client.api.push(repository, tag=version, stream=True, decode=True):
        if "error" in chunk:
            raise ImageBuildError(f"pushing {tag} failed: {chunk['error'].strip()}")
    echo(f"workspace: pushed {tag}")


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ensure_images(workspace: Workspace, echo: Callable[[str], None] = _to_stderr) -> None:
    """Build the layers the engine lacks, then push those that go to a registry."""
    client = docker_client()
    for image in workspace.images:
        if _exists(client, image.tag):
            echo(f"workspace: {image.tag} is up to date")
        else:
            echo(f"workspace: building {image.tag} from {workspace.source.directory} ({workspace.source.files} files) on {image.base}")
            build_layer(client, image, workspace.source, echo)
        if image.push:
            push(client, image.tag, echo)
