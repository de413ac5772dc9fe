"""The Kubernetes backend: one Indexed Job per role, a headless Service, supervision by the Job controller."""

from __future__ import annotations
