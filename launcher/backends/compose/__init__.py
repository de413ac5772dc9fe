"""The Docker Compose backend: one container per task on a private network, supervised by tfcluster."""

from __future__ import annotations
