"""Shipping the user's workspace: which files go, their digest, and building/pushing the thin layers.

Contract: ``scan(directory)`` lists and digests the files that ship: regular files, less
``DEFAULT_RULES``, the ``.dockerignore`` and credentials by content (``launcher.backends.credentials``);
no symbolic link ships. It raises ``LaunchError`` (missing directory) or ``SpecError`` (bad
``.dockerignore``, over ``MAX_WORKSPACE_BYTES``), and reports the credentials left out or taken back.
``ensure_images(workspace, echo)`` builds each ``WorkspaceImage`` missing or on another base, and
pushes those marked ``push``; requirements never replace the image's TensorFlow stack.
What ships, as a user meets it: docs/security.md.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from launcher.backends.credentials import NAME_PATTERNS, by_name, detect
from launcher.backends.dockerignore import Rules, decoded, make_rule, read_rules
from launcher.backends.images import HOST_CA_BUNDLE, build_note, docker_client
from launcher.errors import ImageBuildError, LaunchError
from launcher.plan.images import TASK_UID
from launcher.plan.workspace import CONTAINER_WORKSPACE, CredentialFile, Workspace, WorkspaceImage, WorkspaceSource
from launcher.spec.problems import Problem, SpecError

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
#: The label a layer carries: the id of the base image it was built on.
BASE_LABEL = "org.tfcluster.workspace.base-id"
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
COPY --chown={uid}:{uid} workspace/ {workdir}/
ENV PYTHONPATH={packages}/site-packages-1:{packages}/site-packages-2${{PYTHONPATH:+:$PYTHONPATH}} \\
    PATH={packages}/bin:$PATH
WORKDIR {workdir}
"""


#: Not code: version control, virtualenvs, tfcluster's own run dirs, bytecode.
NOT_CODE = ("**/.git", "**/.venv", "**/venv", "**/tfcluster-runs", "**/__pycache__")
CREDENTIAL_ORIGIN = "tfcluster's credential list"
#: What never ships unless a ``!`` line of the workspace's ``.dockerignore`` takes it back (later lines win, as
#: in Docker), in ``.dockerignore`` syntax and at any depth: credentials by name (``launcher.backends.credentials``;
#: by content: ``withhold_by_content``), then what is not code.
DEFAULT_RULES = (*(make_rule(p, CREDENTIAL_ORIGIN) for p in NAME_PATTERNS), *(make_rule(p, "tfcluster's defaults") for p in NOT_CODE))
#: Above this, ``scan`` refuses a workspace (``force`` overrides): every task's image carries it.
MAX_WORKSPACE_BYTES = 100 << 20
IGNORE_FILE = ".dockerignore"


@dataclass
class Selection:
    """What ships of a workspace: ``files`` as (relative posix path, path, size), sorted by path; ``withheld``,
    the credentials left out (a directory once, as ``dir/``); ``reincluded``, the files ``!`` lines take back
    although they look like credentials; ``undecodable``, shipping names not UTF-8; ``taken_back``, the files a
    ``!`` line decides (they ship whatever their content)."""

    files: list[tuple[str, Path, int]] = field(default_factory=list)
    withheld: list[CredentialFile] = field(default_factory=list)
    reincluded: list[CredentialFile] = field(default_factory=list)
    undecodable: list[str] = field(default_factory=list)
    taken_back: set[str] = field(default_factory=set)


def select(root: Path, contents: bool = True) -> Selection:
    """Walk ``root`` (never following a symbolic link: a link ships nothing, neither itself nor its target;
    nor FIFOs, sockets, devices) and decide each entry by ``DEFAULT_RULES`` then the ``.dockerignore``; with
    ``contents``, then each file by its content (``withhold_by_content``)."""
    rules = Rules([*DEFAULT_RULES, *read_rules(root / IGNORE_FILE, IGNORE_FILE)])
    selection = Selection()
    stack: list[tuple[str, tuple[bool, ...] | None]] = [("", None)]  # a directory and its rules' matches
    while stack:
        directory, parent = stack.pop()
        with os.scandir(root / directory if directory else root) as entries:
            found = [(entry.name, entry.is_dir(follow_symlinks=False), entry.is_file(follow_symlinks=False),
                      entry.stat(follow_symlinks=False).st_size) for entry in entries if not entry.is_symlink()]
        for name, is_dir, is_file, size in found:
            relative = f"{directory}/{name}" if directory else name
            if not (is_dir or is_file):
                continue
            matches = rules.matches(relative, parent)
            decider = rules.decider(matches)
            excluded = decider is not None and not decider.exception
            if is_dir and (not excluded or rules.may_keep_below(relative)):  # a ! line may take something back
                stack.append((relative, matches))
                continue
            if excluded and decider is not None and decider.origin == CREDENTIAL_ORIGIN:
                selection.withheld.append(CredentialFile(path=shown(relative) + ("/" if is_dir else ""), why=by_name(decider.text)))
            if not (is_dir or excluded):
                if decider is not None:  # a ! line ships it
                    selection.taken_back.add(relative)
                    named = next((rule for rule, match in zip(rules.rules, matches, strict=True)
                                  if match and rule.origin == CREDENTIAL_ORIGIN), None)
                    if named is not None:
                        selection.reincluded.append(CredentialFile(path=shown(relative), why=by_name(named.text)))
                if shown(relative) != relative:
                    selection.undecodable.append(shown(relative))
                selection.files.append((relative, root / relative, size))
    selection.files.sort()
    selection.withheld.sort(key=lambda credential: credential.path)
    selection.reincluded.sort(key=lambda credential: credential.path)
    if contents:
        withhold_by_content(selection)
    return selection


def withhold_by_content(selection: Selection, among: Collection[str] | None = None) -> None:
    """Leave out each file of ``selection`` (of those ``among``, default all) that holds a credential by content
    (``launcher.backends.credentials.detect``: a bounded prefix of each), unless a ``!`` line ships it: then it
    ships, named in ``reincluded`` with what it holds. Raises ``OSError`` for a file it cannot read."""
    kept = []
    reincluded = {credential.path: credential for credential in selection.reincluded}
    for relative, path, size in selection.files:
        what = detect(path) if among is None or relative in among else None
        if what is None:
            kept.append((relative, path, size))
        elif relative in selection.taken_back:
            kept.append((relative, path, size))
            reincluded[shown(relative)] = CredentialFile(path=shown(relative), why=what)
        else:
            selection.withheld.append(CredentialFile(path=shown(relative), why=what))
    selection.files = kept
    selection.reincluded = sorted(reincluded.values(), key=lambda credential: credential.path)
    selection.withheld.sort(key=lambda credential: credential.path)


def shown(relative: str) -> str:
    """A file name for messages and the plan: a name that is not UTF-8 with its bytes escaped (``\\xff``)."""
    return decoded(relative, "backslashreplace")


def shipped_files(directory: Path) -> list[tuple[str, Path]]:
    """(relative posix path, path) of every regular file that ships (``select``), sorted by path."""
    return [(relative, path) for relative, path, _ in select(directory).files]


def script_problem(directory: Path, script: str, shipped: bool, own_image: bool = False) -> str | None:
    """Why the tasks cannot run ``script`` from the workspace ``directory``, or None.

    Processes (not ``shipped``) run it in place: it must be a file there.
    Containers (``shipped``) run the workspace layer: a relative ``script``
    must be one of the ``shipped_files`` (not left out by name or by its
    content, which the problem names); an absolute one names a file of
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
    try:
        selection = select(directory, contents=False)
        withhold_by_content(selection, among={relative})  # the script's own content only
    except OSError as exc:
        return f"{shown(str(exc.filename))}: cannot read it: {exc.strerror}"
    if not any(relative == name for name, _, _ in selection.files):
        why = next((credential.why for credential in selection.withheld if credential.path == shown(relative)), None)
        if why is not None:
            return f"{script}: left out of the workspace image as a credential ({why}): a line !{relative} in {IGNORE_FILE} ships it"
        return (f"{script}: left out of the workspace image ({IGNORE_FILE} or tfcluster's default exclusions: "
                f"a line !{relative} there ships it; or a symbolic link, which never ships)")
    return None


def _absolute_script_problem(directory: Path, script: str, own_image: bool) -> str | None:
    path = Path(script).resolve()
    if path.is_relative_to(directory):
        return (f"{script}: a path on this machine; the tasks have the workspace at {CONTAINER_WORKSPACE}: "
                f"give the script relative to it ({path.relative_to(directory).as_posix()})")
    if own_image:
        return None
    return f"{script}: outside the workspace {directory}, which is all that ships to the tasks"


def scan(directory: str | Path, contents: bool = True, max_bytes: int | None = MAX_WORKSPACE_BYTES) -> WorkspaceSource:
    """The workspace at ``directory`` (relative to the current directory) as the planner takes it; without
    ``contents`` (processes run it in place: nothing ships) only the directory is resolved and checked.

    Raises ``SpecError`` (exit 2, one line) for a bad ``.dockerignore``, an unreadable entry, a shipping name
    that is not UTF-8, or more than ``max_bytes`` to ship (naming the biggest entries; None: no cap), all
    before reading any file's contents; then each file's first bytes tell whether it holds a credential.
    """
    root = Path(directory).resolve()
    if not root.is_dir():
        raise LaunchError(f"workspace {directory!r} is not a directory ({root})")
    if not contents:
        return WorkspaceSource(directory=str(root), digest="")
    try:
        selection = select(root, contents=False)
    except OSError as exc:
        raise _unreadable(exc) from None
    if selection.undecodable:
        raise SpecError([Problem("workspace", f"{', '.join(map(repr, selection.undecodable[:5]))}: file names that are not UTF-8 "
                                              f"would ship from {root}: rename them or leave them out in {IGNORE_FILE}")])
    size = sum(size for _, _, size in selection.files)
    if max_bytes is not None and size > max_bytes:
        raise SpecError([Problem("workspace", _oversize(root, selection, size, max_bytes))])
    try:
        withhold_by_content(selection)
    except OSError as exc:
        raise _unreadable(exc) from None
    size = sum(size for _, _, size in selection.files)
    return WorkspaceSource(directory=str(root), digest=_digest(selection), files=[r for r, _, _ in selection.files],
                           size=size, withheld=selection.withheld, reincluded=selection.reincluded)


def _unreadable(error: OSError) -> SpecError:
    return SpecError([Problem("workspace", f"{shown(str(error.filename))!r}: cannot read it: {error.strerror}")])


def _oversize(root: Path, selection: Selection, size: int, max_bytes: int) -> str:
    entries: dict[str, int] = {}
    for relative, _, file_size in selection.files:
        top, _, below = relative.partition("/")
        entries[top + ("/" if below else "")] = entries.get(top + ("/" if below else ""), 0) + file_size
    biggest = sorted(entries.items(), key=lambda item: -item[1])[:3]
    listed = ", ".join(f"{shown(name)!r} ({mebibytes(n)})" for name, n in biggest)
    return (f"{root} would ship {mebibytes(size)}, over the {mebibytes(max_bytes)} cap; the biggest: {listed}; "
            f"leave them out in {IGNORE_FILE}, or use --force")


def mebibytes(count: int) -> str:
    return f"{count / (1 << 20):.1f} MiB"


def _digest(selection: Selection) -> str:
    """A hash of the shipped files' paths, exec bits and contents, each read in chunks (bounded memory)."""
    digest = hashlib.sha256()
    for relative, path, _ in selection.files:
        try:
            with path.open("rb") as handle:
                digest.update(f"{relative}\0{os.access(path, os.X_OK)}\0".encode(errors="surrogateescape"))
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
        except OSError as exc:
            raise SpecError([Problem("workspace", f"{shown(relative)!r}: cannot read it: {exc.strerror}")]) from None
        digest.update(b"\0")
    return digest.hexdigest()


def _requirements(root: Path, echo: Callable[[str], None]) -> bytes:
    path = root / REQUIREMENTS
    if not path.is_file():
        return b""
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError:
        raise ImageBuildError(f"workspace: {REQUIREMENTS} is not UTF-8") from None
    kept = []
    for line in text.splitlines():
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
        _add(tar, "Dockerfile", LAYER_DOCKERFILE.format(
            base=image.base, packages=PACKAGES, workdir=CONTAINER_WORKSPACE, uid=TASK_UID).encode())
        _add(tar, "build/requirements.txt", _requirements(root, echo))
        _add(tar, "build/ca.crt", ca_bundle.read_bytes() if ca_bundle else b"")
        directory = tarfile.TarInfo("workspace")
        directory.type, directory.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(directory)  # COPY needs it even for an empty workspace
        for relative in source.files:  # what the plan lists, nothing else
            path = root / relative
            info = tar.gettarinfo(str(path), arcname=f"workspace/{relative}")
            if not info.isfile():  # replaced since the scan (by a link, say): it does not ship
                continue
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    context.seek(0)
    return context


def _base_id(client: Any, base: str) -> str:
    """The id of the base image on the engine, pulled first if the engine lacks it (as a build would)."""
    import docker.errors

    try:
        return str(client.images.get(base).id)
    except docker.errors.ImageNotFound:
        pass
    try:
        return str(client.images.pull(base).id)
    except docker.errors.APIError as error:
        raise ImageBuildError(f"the workspace's base image {base} is not on this engine and pulling it failed: "
                              f"{error.explanation or error}") from None


def _built_on(client: Any, tag: str) -> str | None:
    """The base id the layer ``tag`` was built on; None if the engine has no such image."""
    import docker.errors

    try:
        labels = client.images.get(tag).labels or {}
    except docker.errors.ImageNotFound:
        return None
    return str(labels.get(BASE_LABEL, ""))


def build_layer(client: Any, image: WorkspaceImage, source: WorkspaceSource, base_id: str,
                echo: Callable[[str], None]) -> None:
    ca = HOST_CA_BUNDLE if HOST_CA_BUNDLE.is_file() else None
    stream = client.api.build(fileobj=layer_context(image, source, ca, echo), custom_context=True, tag=image.tag,
                              labels={BASE_LABEL: base_id}, network_mode="host", rm=True, forcerm=True, decode=True)
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


def ensure_images(workspace: Workspace, echo: Callable[[str], None] = build_note) -> None:
    """Build the layers the engine lacks, then push those that go to a registry."""
    client = docker_client()
    for image in workspace.images:
        base_id = _base_id(client, image.base)
        built_on = _built_on(client, image.tag)
        if built_on == base_id:
            echo(f"workspace: {image.tag} is up to date")
        else:
            why = "" if built_on is None else f" (its base {image.base} was rebuilt)"
            echo(f"workspace: building {image.tag} from {workspace.source.directory} ({len(workspace.source.files)} files) "
                 f"on {image.base}{why}")
            build_layer(client, image, workspace.source, base_id, echo)
        if image.push:
            push(client, image.tag, echo)
