"""``bench/bench_k8s_scale.py``'s attribution of requests to a run's supervisor, read from the API server's audit log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO

sys.path.insert(0, str(REPO / "bench"))

import bench_k8s_scale  # noqa: E402

SUPERVISOR = "system:serviceaccount:tfcluster-e2e:run-supervisor"


def event(audit_id: str, verb: str, resource: str, at: str, stage: str = "ResponseComplete",
          user: str = SUPERVISOR, subresource: str | None = None) -> str:
    ref = {"resource": resource, "namespace": "tfcluster-e2e", **({"subresource": subresource} if subresource else {})}
    return json.dumps({"kind": "Event", "auditID": audit_id, "stage": stage, "verb": verb, "user": {"username": user},
                       "objectRef": ref, "requestReceivedTimestamp": at})


def test_the_supervisors_requests_in_the_window_are_counted_once_each_by_verb_and_resource(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.log"
    monkeypatch.setattr(bench_k8s_scale, "AUDIT_LOG", log)
    # 2026-11-29T12:00:00Z is 1795953600
    (tmp_path / "audit.log.1").write_text(event("a", "list", "pods", "2026-11-29T12:00:01.000000Z") + "\n")
    log.write_text("\n".join([
        event("w", "watch", "pods", "2026-11-29T12:00:02.000000Z", stage="ResponseStarted"),
        event("w", "watch", "pods", "2026-11-29T12:00:02.000000Z"),  # the same watch, ended
        event("b", "list", "jobs", "2026-11-29T12:00:03.500000Z"),
        event("c", "get", "pods", "2026-11-29T12:00:04.000000Z", subresource="log"),
        event("d", "list", "pods", "2026-11-29T12:00:04.000000Z", user="system:serviceaccount:tfcluster-e2e:other"),
        event("e", "list", "pods", "2026-11-29T12:01:00.000000Z"),  # after the window
        event("f", "list", "pods", "2026-11-29T11:59:59.000000Z"),  # before it
    ]) + "\n")
    counted = bench_k8s_scale.audited(SUPERVISOR, 1795953600.0, 1795953660.0)
    assert counted == {"list pods": 1, "watch pods": 1, "list jobs": 1, "get pods log": 1}


def test_no_audit_log_is_no_attribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_k8s_scale, "AUDIT_LOG", tmp_path / "audit.log")
    assert bench_k8s_scale.audited(SUPERVISOR, 0.0, 1.0) is None
