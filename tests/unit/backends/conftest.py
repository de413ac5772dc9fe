"""Fixtures of the backend tests: the fake Kubernetes API server (``helpers.k8s_fake``), started per test."""

from helpers.k8s_fake import fake_fixture  # noqa: F401  (the fixture ``fake``)
