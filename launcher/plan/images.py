"""Which container image a task runs: the one home of the worker images' names.

Contract: ``TASK_UID`` is the worker image's user, the one home of its uid.
``image_for(spec, role_spec)`` is the role's ``image``, else the
spec's ``image``, else the worker image of the role's variant: the GPU variant
(``tfcluster-worker:latest-gpu``, ``tfcluster build --gpu``) for a role that
requests ``resources.gpu > 0``, the CPU one (``tfcluster-worker:latest``) otherwise. ``is_worker_image(image)``:
``image`` is one of them (any registry, tag or digest), which hold tfcluster and py-spy.
"""

from __future__ import annotations

from enum import Enum

from launcher.spec.image_reference import REFERENCE, WORKER_REPOSITORY
from launcher.spec.models import ClusterSpec, RoleSpec

#: uid and gid of the worker image's non-root user ``tfcluster`` (worker_image/Dockerfile's ``USER``), owner of
#: /checkpoints: the container backends run every task as it and give it what it writes.
TASK_UID = 1000


class ImageVariant(str, Enum):
    """The two builds of the worker image (``worker_image/Dockerfile``, build arg ``VARIANT``)."""

    CPU = "cpu"  # tensorflow-cpu
    GPU = "gpu"  # tensorflow[and-cuda]: CUDA libraries from PyPI's nvidia-* wheels

    @property
    def default_tag(self) -> str:
        return f"{WORKER_REPOSITORY}:latest" if self is ImageVariant.CPU else f"{WORKER_REPOSITORY}:latest-{self.value}"


def variant_for(role_spec: RoleSpec) -> ImageVariant:
    return ImageVariant.GPU if role_spec.resources.gpu > 0 else ImageVariant.CPU


def image_for(spec: ClusterSpec, role_spec: RoleSpec) -> str:
    return role_spec.image or spec.image or variant_for(role_spec).default_tag


def is_worker_image(image: str) -> bool:
    match = REFERENCE.fullmatch(image)
    return match is not None and match["name"].rpartition("/")[2] == WORKER_REPOSITORY
