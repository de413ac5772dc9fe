"""The Kubernetes backend: one suspended Job per task and a headless Service, supervised by the one supervisor in a pod."""

from __future__ import annotations
