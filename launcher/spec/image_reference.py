"""Image references: the grammar Docker and OCI registries accept, the one home of that rule.

Contract: ``image_problem(text)`` is None for a reference ``docker pull``
would accept (``[host[:port]/]path[:tag][@digest]``, the grammar of
``github.com/distribution/reference``: lowercase path components joined by
``.``, ``_``, ``__`` or dashes; a tag of at most 128 word characters, dots
and dashes; a digest ``algorithm:hex``; at most 255 characters of name),
else one sentence saying what is wrong; ``registry_problem`` the same for
a registry prefix (``host[:port][/path]``); ``pull_policy(image)`` the
``imagePullPolicy`` tfcluster's Kubernetes pods get for an image. ``ImageReference`` and
``RegistryReference`` are the pydantic types of every spec field that names
an image or a registry, so a reference with a
newline, a space or an uppercase path never reaches a Dockerfile, a compose
file or a manifest. The expression has no nested quantifier that could
backtrack catastrophically, and the input is bounded before matching.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator

MAX_NAME = 255
#: Longer than any valid reference (name + ':' + 128-char tag + '@' + a sha512 digest).
MAX_REFERENCE = MAX_NAME + 1 + 128 + 1 + 7 + 128

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
#: The repository of tfcluster's worker image (``tfcluster build``; ``launcher.plan.images`` names its tags).
WORKER_REPOSITORY = "tfcluster-worker"


def image_problem(text: str) -> str | None:
    """What is wrong with ``text`` as an image reference, or None (see the module contract)."""
    if len(text) > MAX_REFERENCE:
        return f"not an image reference: over {MAX_REFERENCE} characters"
    match = REFERENCE.fullmatch(text)
    if match is None:
        return (f"not an image reference ([host[:port]/]path[:tag][@digest], path in lowercase letters, digits "
                f"and . _ -): {text!r}")
    if len(match["name"]) > MAX_NAME:
        return f"not an image reference: the name is over {MAX_NAME} characters"
    return None


def registry_problem(text: str) -> str | None:
    """What is wrong with ``text`` as the registry part of an image reference (``host[:port][/path]``), or None."""
    if image_problem(f"{text}/image") is None and not text.endswith("/"):
        return None
    return f"not a registry (host[:port][/path], path in lowercase letters, digits and . _ -): {text[:MAX_NAME]!r}"


def pull_policy(image: str) -> str:
    """The ``imagePullPolicy`` of a tfcluster pod running ``image`` (a workspace layer it pushed aside: ``Always``).

    Kubernetes' default (``Always`` for an image without a digest tagged ``latest`` or untagged, else
    ``IfNotPresent``), except for tfcluster's worker image named without a registry (``tfcluster-worker:<tag>``):
    ``tfcluster build`` makes it, and it reaches a node by being loaded there (``kind load docker-image``,
    ``.ci/k8s.sh``), so ``IfNotPresent``: ``Always`` would have the node look for it on Docker Hub.
    """
    match = REFERENCE.fullmatch(image)
    if match is None:
        return "Always"
    if match["name"] == WORKER_REPOSITORY or match["digest"] or match["tag"] not in (None, "latest"):
        return "IfNotPresent"
    return "Always"


def _raising(check: Callable[[str], str | None]) -> Callable[[str], str]:
    def checked(text: str) -> str:
        problem = check(text)
        if problem is not None:
            raise ValueError(problem)
        return text

    return checked


#: A spec field naming an image.
ImageReference = Annotated[str, AfterValidator(_raising(image_problem))]
#: A spec field naming a registry images are pushed to and pulled from.
RegistryReference = Annotated[str, AfterValidator(_raising(registry_problem))]
