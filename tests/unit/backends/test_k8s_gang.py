"""All-or-nothing placement (``kubernetes.gang``, ``launcher.backends.kubernetes.gang``): the run's PodGroup, its
pods joining it, ``up`` on a cluster that serves no PodGroups, and ``down``; against the fake API server (held to
the real one by tests/contract/test_kubernetes_api_contract.py; the scheduler's part is tests/e2e/test_k8s_e2e_gang.py)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from fakes.kubernetes_api import POD_GROUP_DISCOVERY, FakeKubernetes
from helpers.k8s_fake import backend_for, kubeconfig_for, pod_of, settled
from helpers.k8s_specs import DEMO, dry_run_for, manifests, plan_for, without_gang
from launcher.backends.kubernetes import apply, gang
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.runtime import KubernetesRuntime
from launcher.cli.commands import main
from launcher.errors import LaunchError
from launcher.plan import naming

PSS = {"name": "pss", "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}, "evaluator": {}},
       "tensorboard": {"enabled": True}}


def _kinds(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("data", [DEMO, PSS], ids=["demo", "pss"])
def test_every_task_pod_and_only_they_join_one_pod_group_of_all_of_them(data: Any) -> None:
    plan = plan_for(data)
    objects = manifests(plan)
    [group] = _kinds(objects, "PodGroup")
    assert group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert group["metadata"]["name"] == naming.pod_group_name(plan.name)
    assert group["metadata"]["labels"] == naming.labels(plan.name, plan.run_id)  # found and removed as the run's
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": len(plan.tasks)}}}
    members = {j["metadata"]["name"]: j["spec"]["template"]["spec"].get("schedulingGroup") for j in _kinds(objects, "Job")}
    joined = {"podGroupName": naming.pod_group_name(plan.name)}
    assert {name: g for name, g in members.items() if g is not None} == {t.name: joined for t in plan.tasks}
    assert members[naming.supervisor_name(plan.name)] is None  # the supervisor pod is never in the gang
    assert objects.index(group) < min(objects.index(j) for j in _kinds(objects, "Job"))  # its pods find it


def test_gang_off_renders_neither_the_group_nor_the_pods_reference() -> None:
    objects = manifests(without_gang(plan_for(DEMO)))
    assert not _kinds(objects, "PodGroup")
    assert all("schedulingGroup" not in j["spec"]["template"]["spec"] for j in _kinds(objects, "Job"))


def test_the_group_takes_the_priority_class_its_pods_carry_and_refuses_pods_that_differ() -> None:
    """Kubernetes 1.37 refuses a pod whose priority is not its group's: the group reads it off the rendered pods."""
    plan = plan_for(DEMO)
    jobs = _kinds(manifests(plan), "Job")[:3]

    def with_class(job: dict[str, Any], name: str | None) -> dict[str, Any]:
        pod = {**job["spec"]["template"]["spec"], **({"priorityClassName": name} if name else {})}
        return {**job, "spec": {**job["spec"], "template": {**job["spec"]["template"], "spec": pod}}}

    [group] = gang.pod_group(plan, [with_class(j, "high") for j in jobs])
    assert group["spec"]["priorityClassName"] == "high"
    with pytest.raises(ValueError, match="priorityClassName"):
        gang.pod_group(plan, [with_class(jobs[0], "high"), with_class(jobs[1], None)])


def test_up_creates_the_group_before_the_jobs_and_down_removes_it_but_not_a_group_it_did_not_make(
    fake: FakeKubernetes,
) -> None:
    theirs = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
              "metadata": {"name": "someone-elses", "labels": {naming.LABEL_CLUSTER: "demo"}},
              "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
    fake.create("podgroups", "default", theirs)
    backend = backend_for(fake)
    dry_run = backend.fit(dry_run_for(DEMO))
    backend.submit(dry_run)
    created = [path for method, path in fake.requests if method == "POST"]
    group_at = next(i for i, path in enumerate(created) if path.endswith("/podgroups"))
    assert group_at < min(i for i, path in enumerate(created) if path.endswith("/jobs"))
    assert fake.get("podgroups", naming.pod_group_name("demo"))["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    backend.cancel("demo", volumes=True)
    fake.now += 1
    assert fake.get("podgroups", naming.pod_group_name("demo")) is None
    assert fake.get("podgroups", "someone-elses") is not None  # only its cluster label: not tfcluster's


def test_up_asks_the_cluster_once_and_applies_the_gang_it_serves(fake: FakeKubernetes) -> None:
    dry_run = dry_run_for(DEMO)
    assert backend_for(fake).fit(dry_run) is dry_run
    assert [path.rstrip("/") for _, path in fake.requests] == [POD_GROUP_DISCOVERY]


def test_auto_on_a_cluster_without_pod_groups_starts_without_the_gang_saying_so_in_one_line(
    fake: FakeKubernetes, caplog: pytest.LogCaptureFixture,
) -> None:
    fake.serves_pod_groups = False
    backend = backend_for(fake)
    with caplog.at_level(logging.WARNING):
        dry_run = backend.fit(dry_run_for(DEMO))
    [line] = [r.getMessage() for r in caplog.records if r.name == gang.__name__]
    assert "not all-or-nothing" in line and "GenericWorkload" in line and "scheduling.k8s.io/v1beta1" in line
    assert "\n" not in line
    assert dry_run == KubernetesBackend.dry_run(without_gang(plan_for(DEMO)))
    backend.submit(dry_run)
    assert not fake.list("podgroups") and fake.get("jobs", "demo-worker-0") is not None
    backend.cancel("demo", volumes=True)  # its listing of PodGroups (404 there) is nothing to delete
    fake.now += 1
    assert not fake.objects


def test_gang_on_refuses_a_cluster_without_pod_groups_in_one_line_before_creating_anything(
    fake: FakeKubernetes,
) -> None:
    fake.serves_pod_groups = False
    data = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"gang": "on"}}
    with pytest.raises(LaunchError, match="kubernetes.gang is on but the cluster does not serve") as refused:
        backend_for(fake).fit(dry_run_for(data))
    assert "\n" not in str(refused.value) and "GenericWorkload" in str(refused.value)
    assert not fake.objects


def test_gang_off_asks_nothing(fake: FakeKubernetes) -> None:
    data = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"gang": "off"}}
    dry_run = dry_run_for(data)
    assert backend_for(fake).fit(dry_run) is dry_run and not fake.requests


def test_render_with_gang_off_says_in_one_line_that_the_start_is_not_all_or_nothing(
    cli, write_spec, tmp_path: Path
) -> None:
    spec = write_spec({**yaml.safe_load(DEMO.read_text()), "kubernetes": {"gang": "off"}})
    result = cli.invoke(main, ["render", str(spec), "-b", "k8s", "-d", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if "not all-or-nothing" in line]
    assert "kubernetes.gang is off" in line
    assert "PodGroup" not in (tmp_path / "out" / "jobs.yaml").read_text()
    result = cli.invoke(main, ["render", str(write_spec(yaml.safe_load(DEMO.read_text()), "auto.yaml")), "-b", "k8s",
                               "-d", str(tmp_path / "auto")])
    assert "not all-or-nothing" not in result.stderr and "kind: PodGroup" in (tmp_path / "auto" / "jobs.yaml").read_text()


def test_up_on_a_cluster_without_pod_groups_says_so_in_one_line_and_starts_the_run_without_them(
    fake: FakeKubernetes, cli, write_spec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.serves_pod_groups = False
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(fake, tmp_path / "config")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = cli.invoke(main, ["up", str(write_spec({"name": "plain", "roles": {"worker": {"replicas": 2}}})),
                               "-b", "k8s", "--detach"])
    assert result.exit_code == 0, result.output
    assert len([line for line in result.stderr.splitlines() if "not all-or-nothing" in line]) == 1, result.stderr
    job = fake.get("jobs", "plain-worker-0")
    assert job is not None and "schedulingGroup" not in job["spec"]["template"]["spec"]


def test_the_groups_min_count_follows_the_tasks_meant_to_run_so_a_restart_after_one_ended_is_placed(
    fake: FakeKubernetes,
) -> None:
    """The scheduler counts only pods that have not ended toward ``minCount``: with a worker done for good, a restart
    of the others would wait forever for it. The supervisor's runtime lowers ``minCount`` to the tasks whose runs
    have not ended, and raises it to every task before it starts one (a round of starts waits whole)."""
    backend = backend_for(fake)
    dry_run = dry_run_for({**yaml.safe_load(DEMO.read_text()), "kubernetes": {"supervisor": False}})
    apply.submit(backend.api, dry_run, "default")
    fake.job_controller = True
    runtime = KubernetesRuntime(backend.api, dry_run.plan, "default", clock=lambda: fake.now, objects=settled(fake))
    chief, worker_0, worker_1 = dry_run.plan.tasks

    def min_count() -> int:
        group = fake.get("podgroups", naming.pod_group_name("demo"))
        return int(group["spec"]["schedulingPolicy"]["gang"]["minCount"])

    for task in (chief, worker_0, worker_1):
        runtime.start(task)
    assert [runtime.poll(t) for t in (chief, worker_0, worker_1)] == [None, None, None] and min_count() == 3
    fake.finish_pod(pod_of(fake, worker_1.name), 0)  # done for good (its exit 0 decides nothing)
    fake.now += 1
    assert runtime.poll(worker_1) == 0 and min_count() == 2
    runtime.stop([chief, worker_0], 1)  # a restart of the two others
    fake.now += 1
    counts = []
    for task in (chief, worker_0):
        runtime.start(task)
        counts.append(min_count())
    assert counts == [3, 3]  # while the round starts, its pods wait for each other
    fake.now += 1
    assert runtime.poll(chief) is None and min_count() == 2  # then the two it started: placed together
    patches = [path for method, path in fake.requests if method == "PATCH" and "/podgroups/" in path]
    assert len(patches) == 3  # 3 -> 2, 2 -> 3 (one, before the first start), 3 -> 2: once per change
