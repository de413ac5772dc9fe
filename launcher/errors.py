"""The errors tfcluster raises to its callers, one base class for all of them.

Contract: everything the CLI reports as a one-line message derives from
``TfclusterError``; the CLI maps each type to an exit code (``SpecError`` and
``UnsafeStatePath`` 2, the others 1). ``SpecError`` lives with the spec (it
carries located problems) in ``launcher.spec.problems``, ``UnsafeStatePath``
with the state files in ``launcher.supervision.statefile``.
"""

from __future__ import annotations


class TfclusterError(Exception):
    """Base of every error tfcluster reports to its user; ``str()`` is the message."""


class LaunchError(TfclusterError):
    """A launch or a backend operation failed; whatever a launch had started is already cleaned up."""


class BackendUnavailable(TfclusterError):
    """The backend's runtime (Docker, Compose v2, a kubeconfig) is missing; the message says what to install."""


class ImageBuildError(TfclusterError):
    """Building an image failed; the message holds the engine's error."""
