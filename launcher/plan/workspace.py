"""The user's workspace in the plan: where tasks run, and the thin image layers that ship it to containers.

Contract: a ``WorkspaceSource`` (a directory and the digest of the files
that would be shipped, made by ``launcher.backends.workspace.scan``) goes
into the planner, which stays pure. On the local backend tasks start in
the directory. On container backends every distinct base image gets one
``WorkspaceImage``: ``FROM`` the base, the workspace at ``/workspace``
(the working directory), its ``requirements.txt`` installed; its tag
carries a hash of the files and the base's name, so a changed workspace
never reuses a stale layer (a rebuilt base under the same name is found
when the layer is ensured, by the base id the layer is labelled with:
``launcher.backends.workspace``). With a
registry (Kubernetes) the tag names it and the layer is pushed there.
"""

from __future__ import annotations

import hashlib
import re

from pydantic import BaseModel, ConfigDict

#: Where the workspace is in a workspace image, and the tasks' working directory there.
CONTAINER_WORKSPACE = "/workspace"
#: Bump when the layer's Dockerfile changes, so old layers are not reused.
LAYER_FORMAT = "3"
#: Hex digits of the hash a workspace layer's tag carries.
KEY_LENGTH = 16


class CredentialFile(BaseModel):
    """A file of the workspace that looks like a credential (a directory, by name: ``dir/``), and ``why``: the
    rule that matched (``launcher.backends.credentials``), never the secret."""

    model_config = ConfigDict(frozen=True)

    path: str
    why: str


class WorkspaceSource(BaseModel):
    """The workspace as scanned on the controller's machine: its absolute path and content digest; for
    containers, every file that ships (``files``, sorted, ``size`` bytes in all), the credentials left out
    (``withheld``, by name or content; a directory once) and those a ``.dockerignore`` ``!`` line ships
    anyway (``reincluded``), each sorted by path."""

    model_config = ConfigDict(frozen=True)

    directory: str
    digest: str
    files: list[str] = []
    size: int = 0
    withheld: list[CredentialFile] = []
    reincluded: list[CredentialFile] = []


class WorkspaceImage(BaseModel):
    """One thin layer to build (and push, when ``push``) before the tasks start."""

    model_config = ConfigDict(frozen=True)

    base: str
    tag: str
    push: bool


class Workspace(BaseModel):
    """The workspace part of a plan: the source, the tasks' working directory, and the layers to build."""

    model_config = ConfigDict(frozen=True)

    source: WorkspaceSource
    workdir: str
    images: list[WorkspaceImage] = []

    def image_of(self, base: str) -> str:
        """The tag a task whose image is ``base`` runs instead."""
        return next(image.tag for image in self.images if image.base == base)


def workspace_image(cluster: str, base: str, source: WorkspaceSource, registry: str | None) -> WorkspaceImage:
    """The layer of ``source`` on ``base``: ``[registry/]tfcluster-workspace-<cluster>:<hash>``."""
    key = hashlib.sha256(f"{LAYER_FORMAT}\0{base}\0{source.digest}".encode()).hexdigest()[:KEY_LENGTH]
    return WorkspaceImage(base=base, tag=f"{_repository(cluster, registry)}:{key}", push=registry is not None)


def is_workspace_tag(image: str, cluster: str, registry: str | None) -> bool:
    """Whether ``image`` is a tag ``workspace_image`` gives a layer of ``cluster`` (whatever its files and base,
    which only the hash says)."""
    repository, _, key = image.rpartition(":")
    return repository == _repository(cluster, registry) and re.fullmatch(f"[0-9a-f]{{{KEY_LENGTH}}}", key) is not None


def _repository(cluster: str, registry: str | None) -> str:
    repository = f"tfcluster-workspace-{cluster}"
    return f"{registry.rstrip('/')}/{repository}" if registry else repository


def plan_workspace(cluster: str, source: WorkspaceSource, bases: list[str] | None, registry: str | None) -> Workspace:
    """Tasks run in ``source.directory`` (``bases`` None: processes), or in a layer per base image."""
    if bases is None:
        return Workspace(source=source, workdir=source.directory)
    images = [workspace_image(cluster, base, source, registry) for base in sorted(set(bases))]
    return Workspace(source=source, workdir=CONTAINER_WORKSPACE, images=images)
