"""``up`` refuses a run that a ResourceQuota of its namespace could never admit (``launcher.backends.kubernetes.quota``),
in one line, before anything is created; a quota whose room is only taken now, a scope the run's pods are not in,
and a launcher whose Role may not list quotas leave the launch as it was. On the fake API server."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fakes.kubernetes_api import FakeKubernetes
from helpers.k8s_fake import backend_for, rbac_allowed
from helpers.k8s_specs import DEMO, dry_run_for
from launcher.backends.kubernetes import quota
from launcher.errors import LaunchError

#: The demo's three tasks, each asking 1 GiB (requests = limits), and its supervisor (128 MiB request).
_DEMO = yaml.safe_load(DEMO.read_text())
SIZED: dict[str, Any] = {**_DEMO, "roles": {role: {**task, "resources": {"memory": "1Gi", "cpu": "1"}}
                                            for role, task in _DEMO["roles"].items()}}


def quota_of(fake: FakeKubernetes, hard: dict[str, str], **spec: Any) -> None:
    fake.create("resourcequotas", "default", {"metadata": {"name": "team"}, "spec": {"hard": hard, **spec}})


def left(fake: FakeKubernetes) -> list[tuple[str, ...]]:
    return [key for key in fake.objects if key[0] not in ("namespaces", "resourcequotas")]


@pytest.mark.parametrize(("hard", "over"), [
    ({"pods": "3"}, "pods 4 > 3"),
    ({"requests.memory": "3Gi"}, "requests.memory 3200Mi > 3Gi"),
    ({"memory": "3Gi", "pods": "10"}, "memory 3200Mi > 3Gi"),
    ({"limits.cpu": "3"}, "limits.cpu 3.5 > 3"),
])
def test_a_quota_that_could_never_admit_the_run_refuses_it_in_one_line_and_nothing_is_created(
        fake: FakeKubernetes, hard: dict[str, str], over: str) -> None:
    quota_of(fake, hard)
    with pytest.raises(LaunchError) as refused:
        backend_for(fake).submit(dry_run_for(SIZED))
    message = str(refused.value)
    assert "\n" not in message and message.startswith(
        f"demo cannot start in namespace default: ResourceQuota team can never admit the run's 4 pods at once ({over}:"), message
    assert left(fake) == []


def test_a_quota_with_room_for_the_run_but_not_now_lets_it_launch(fake: FakeKubernetes) -> None:
    """Its room is taken by other pods now (``used``): it frees; the run waits ``pending`` meanwhile."""
    quota_of(fake, {"pods": "4", "requests.memory": "4Gi"})
    fake.update("resourcequotas", "default", "team", lambda q: q.update(status={"used": {"pods": "4"}}))
    backend_for(fake).submit(dry_run_for(SIZED))
    assert fake.get("jobs", "demo-chief-0") is not None


@pytest.mark.parametrize(("scoped", "refused"), [
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}, False),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}}, True),
    ({"scopes": ["NotTerminating"]}, True),
    ({"scopes": ["BestEffort"]}, False),
    ({"scopes": ["CrossNamespacePodAffinity"]}, False),  # not read here: never a refusal by guess
])
def test_a_scoped_quota_counts_only_the_pods_its_scopes_select(fake: FakeKubernetes, scoped: dict[str, Any],
                                                               refused: bool) -> None:
    quota_of(fake, {"pods": "1"}, **scoped)
    if refused:
        with pytest.raises(LaunchError, match="ResourceQuota team can never admit"):
            backend_for(fake).submit(dry_run_for(SIZED))
    else:
        backend_for(fake).submit(dry_run_for(SIZED))


def test_a_launcher_whose_role_cannot_list_quotas_launches_as_before(fake: FakeKubernetes) -> None:
    fake.allowed = rbac_allowed() - {("", "resourcequotas", "list")}
    quota_of(fake, {"pods": "1"})
    backend_for(fake).submit(dry_run_for(SIZED))
    assert fake.get("jobs", "demo-chief-0") is not None


def test_a_pods_need_is_its_containers_sum_or_its_largest_init_container() -> None:
    def pod(containers: list[str], init: list[str]) -> dict[str, Any]:
        return {"containers": [{"resources": {"requests": {"memory": m}}} for m in containers],
                "initContainers": [{"resources": {"requests": {"memory": m}}} for m in init]}

    assert quota._need("requests.memory", [pod(["1Gi", "1Gi"], ["1Gi"])]) == 2 * 2**30
    assert quota._need("requests.memory", [pod(["1Gi"], ["3Gi", "2Gi"])]) == 3 * 2**30
    assert quota._need("count/jobs.batch", [pod([], [])]) is None
