"""The Docker engine as the backends use it: a client, and building the worker image, streaming its log.

Contract: ``build_image`` sends a build context made here (``pyproject.toml``,
``README.md``, ``launcher/`` without caches, ``worker_image/``) and, when a
CA bundle is given, adds it as ``worker_image/build-ca.crt``: pip uses it in
the Dockerfile's build stage only, the final image never contains it. A file
of the context that is a credential (the detector every place that ships
files calls, ``launcher.backends.credentials``: by name, a directory above
included, then by content) refuses the build (``ImageBuildError`` naming each
file and why, never the secret): nothing is packed or sent. Every
build log line goes to ``echo`` as it arrives (by default ``build_note``
logs it, INFO, which a command shows). It returns the built image's id; it
raises ``BackendUnavailable`` when no Docker engine answers and
``ImageBuildError`` when a build step fails.

Why the classic builder: Docker 20.10 here has no buildx, and the Docker
SDK's ``build`` speaks the classic builder API; so the Dockerfile avoids
BuildKit-only syntax (``RUN --mount=type=secret``) and keeps the CA bundle
out of the final image with a multi-stage build instead.
"""

from __future__ import annotations

import io
import logging
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launcher.backends.credentials import NAME_PATTERNS, by_name, detect
from launcher.backends.dockerignore import PatternMatcher, make_pattern
from launcher.errors import BackendUnavailable, ImageBuildError
from launcher.plan.images import ImageVariant

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = "worker_image/Dockerfile"
CA_IN_CONTEXT = "worker_image/build-ca.crt"
CONTEXT_PATHS = ("pyproject.toml", "README.md", "launcher", "worker_image")
#: The host's CA bundle (Debian's path): what pip inside a build trusts on a TLS-intercepting network.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_SKIPPED = {"__pycache__", ".pytest_cache"}
_CREDENTIAL_NAMES = PatternMatcher([make_pattern(pattern, "tfcluster's credential list") for pattern in NAME_PATTERNS])


def build_context(ca_bundle: Path | None = None, root: Path = REPO_ROOT) -> io.BytesIO:
    """The build context as an uncompressed tar (files sorted, mtimes zeroed: same sources, same tar)."""
    if not (root / DOCKERFILE).is_file():
        raise ImageBuildError(f"{root / DOCKERFILE} not found: `tfcluster build` needs a source checkout")
    packed = [(file.relative_to(root).as_posix(), file) for top in CONTEXT_PATHS for file in _files(root / top)
              if not _SKIPPED.intersection(file.relative_to(root).parts)
              and file.relative_to(root).as_posix() != CA_IN_CONTEXT]
    credentials = [f"{relative} ({why})" for relative, file in packed if (why := _credential(relative, file))]
    if credentials:
        raise ImageBuildError(f"the build context holds what looks like a credential, which the image would ship: "
                              f"{'; '.join(credentials)}; move it out of {root} and build again")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for relative, file in packed:
            _add(tar, relative, file.read_bytes(), file.stat().st_mode & 0o777)
        if ca_bundle is not None:
            _add(tar, CA_IN_CONTEXT, Path(ca_bundle).read_bytes(), 0o644)
    buffer.seek(0)
    return buffer


def _credential(relative: str, path: Path) -> str | None:
    """Why the context's file at ``relative`` (slash-separated) is a credential, or None: by name, the directories
    above it included (``**/.ssh`` covers ``.ssh/config``), then by content."""
    parts = relative.split("/")
    matches = None
    for depth in range(1, len(parts) + 1):
        matches = _CREDENTIAL_NAMES.matches("/".join(parts[:depth]), matches)
    named = _CREDENTIAL_NAMES.decider(matches) if matches is not None else None
    return by_name(named.text) if named is not None else detect(path)


def _files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else every file below it, sorted; nothing if it does not exist."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file())


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def docker_client() -> Any:
    """A Docker SDK client for the local engine, or ``BackendUnavailable`` saying what to do."""
    try:
        import docker
        import docker.errors
    except ImportError as exc:
        raise BackendUnavailable("the Docker SDK is missing: pip install docker") from exc
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise BackendUnavailable(
            f"no Docker engine answers ({exc}); install Docker (e.g. apt-get install docker.io) and start dockerd"
        ) from exc
    return client


def build_note(line: str) -> None:
    """A line of a build, logged (INFO) where no ``echo`` is given: a command shows it on stderr through its
    terminal sink (``launcher.cli.terminal``)."""
    log.info("%s", line)


def build_image(
    tag: str | None = None,
    variant: ImageVariant = ImageVariant.CPU,
    base_image: str | None = None,
    ca_bundle: Path | None = None,
    host_network: bool = False,
    echo: Callable[[str], None] = build_note,
    no_cache: bool = False,
) -> str:
    """Build the ``variant`` of the worker image from ``worker_image/Dockerfile`` as ``tag`` (default: the
    variant's tag, see ``launcher.plan.images``) and return its id; layers are reused from Docker's cache
    unless ``no_cache``. The build fails (``ImageBuildError``) if its dependency check does."""
    tag = tag or variant.default_tag
    client = docker_client()
    build_args = {"VARIANT": variant.value, **({"BASE_IMAGE": base_image} if base_image else {})}
    stream = client.api.build(
        fileobj=build_context(ca_bundle),
        custom_context=True,
        dockerfile=DOCKERFILE,
        tag=tag,
        buildargs=build_args,
        network_mode="host" if host_network else None,
        nocache=no_cache,
        rm=True,
        forcerm=True,
        decode=True,
    )
    for chunk in stream:
        if "error" in chunk:
            raise ImageBuildError(f"building {tag} failed: {chunk['error'].strip()}")
        text = chunk.get("stream", "").rstrip("\n")
        if text.strip():
            echo(text)
    image = client.images.get(tag)
    echo(f"built {tag} ({image.short_id}, {image.attrs['Size'] / 1e6:.0f} MB)")
    return image.id
