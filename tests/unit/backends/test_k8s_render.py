"""The Kubernetes manifests: valid for recent Kubernetes versions, faithful to the plan, hardened, linear in size."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from helpers.k8s_specs import DEMO, KUBERNETES_VERSIONS, REPO, SPECS, all_plans, applied_on, expand, manifests, plan_for, without_gang, workers
from launcher.backends.kubernetes import admission_policy
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.cluster_state import planned_again
from launcher.backends.kubernetes.manifests import render_tfjob
from launcher.backends.kubernetes.pods import CONFIG_DIR
from launcher.backends.kubernetes.supervisor_objects import role_rules
from launcher.backends.kubernetes.tensorboard import BoardRun, checked_board, shared_board, tensorboard_objects
from launcher.cli.commands import main
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.images import TASK_UID
from launcher.plan.planner import Plan, Task
from launcher.plan.targets import AGENT_MODULE, CONTAINER_ENTRYPOINT
from launcher.protocol import agent_control, endpoint_wire
from launcher.spec.models import VOLUME_SOURCES
from launcher.worker.tfconfig import resolve_tf_config

PLANS = all_plans()
#: What runs a task's program as its child on Kubernetes: forwards signals, serves the stack endpoint.
AGENT = ["python", "-m", AGENT_MODULE, "--"]


def agent_head(task: Task) -> list[str]:
    """What comes before a task's command under its agent: the agent, and its standby where the task keeps one
    (training tasks of the entrypoint under ``restart.warm``: their restarts in the pod become it), and with the
    entrypoint's standby the zygote that forks every run in the pod (the same interpreter)."""
    standby = [agent_control.STANDBY_OPTION, json.dumps(task.standby_command)] if task.standby_command else []
    if task.standby_command[1:] == ["-m", "launcher.worker.standby"]:
        standby += [agent_control.ZYGOTE_OPTION, json.dumps([task.standby_command[0], "-m", "launcher.worker.zygote"])]
    return [*AGENT[:3], *standby, "--"]
K8S_DIR = REPO / "k8s"


def _docs(files: dict[str, str]) -> list[dict[str, Any]]:
    return [doc for text in files.values() for doc in yaml.safe_load_all(text) if doc["kind"] != "Kustomization"]


#: The objects of each plan of ``PLANS``, rendered once (1,000 workers are 1,000 Jobs: seconds of YAML each time).
_RENDERED: dict[str, list[dict[str, Any]]] = {}


def _objects(plan: Plan) -> list[dict[str, Any]]:
    """``manifests(plan)``, read from ``_RENDERED`` for a plan of ``PLANS`` (the tests only read them)."""
    name = next((n for n, p in PLANS.items() if p is plan), None)
    if name is None:
        return manifests(plan)
    if name not in _RENDERED:
        _RENDERED[name] = manifests(plan)
    return _RENDERED[name]


def _by_kind(plan: Plan, kind: str) -> list[dict[str, Any]]:
    """The run's own objects of ``kind``, not its in-cluster supervisor's (``_supervisor``) nor the params of the
    policy holding it (``admission_policy.params``)."""
    theirs = {naming.supervisor_name(plan.name), naming.admission_params_name(plan.name)}
    return [o for o in _objects(plan) if o["kind"] == kind and o["metadata"]["name"] not in theirs]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", sorted(PLANS))
def test_manifests_validate_against_kubernetes_openapi(name: str, version: str) -> None:
    """What ``up`` applies on each version: with the run's PodGroup from ``GANG_VERSION`` on, without it before."""
    seen: dict[tuple[str, str | None], int] = {}
    plan = PLANS[name]
    served = applied_on(plan, version) is plan
    if not served and f"{name} without gang" not in _RENDERED:
        _RENDERED[f"{name} without gang"] = manifests(without_gang(plan))
    docs = _objects(plan) if served else _RENDERED[f"{name} without gang"]
    assert served is any(doc["kind"] == "PodGroup" for doc in docs)
    for doc in docs:
        role = doc["metadata"]["labels"].get("tfcluster.io/role")
        seen[doc["kind"], role] = seen.get((doc["kind"], role), 0) + 1
        if seen[doc["kind"], role] <= 2:  # a role's task Jobs differ in their names and index alone
            kubernetes_validate.validate(doc, version, strict=True)


def test_schema_validation_rejects_a_broken_job() -> None:
    job = _by_kind(PLANS["demo"], "Job")[0]
    typo = {**job, "spec": {**job["spec"], "backoffLimitPerIndx": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBERNETES_VERSIONS[0], strict=True)
    wrong_type = {**job, "spec": {**job["spec"], "completions": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, KUBERNETES_VERSIONS[0], strict=True)


def _pod_env(config: dict[str, str], job: dict[str, Any], cluster_file: Path) -> dict[str, str]:
    """The container env as the kubelet builds it for the pod of ``job`` (``config``: the ConfigMap's data, $(VAR))."""
    env: dict[str, str] = {}
    for var in job["spec"]["template"]["spec"]["containers"][0]["env"]:
        source = var.get("valueFrom")
        if source is None:
            value = expand(var["value"], env)
        else:
            assert list(source) == ["configMapKeyRef"]  # nothing else differs from pod to pod: each task is a Job
            value = config[source["configMapKeyRef"]["key"]]
        env[var["name"]] = value
    if "TFCLUSTER_CLUSTER_FILE" in env:
        assert env["TFCLUSTER_CLUSTER_FILE"].startswith(CONFIG_DIR + "/")
        env["TFCLUSTER_CLUSTER_FILE"] = str(cluster_file)
    return env


@pytest.mark.parametrize("name", ["demo", "pss", "mwms-evaluator", "workers-only", "every-option", "1000-workers",
                                  "user-program", "user-program-workers"])
def test_every_task_gets_the_planned_name_address_env_and_tf_config(name: str, tmp_path: Path) -> None:
    plan = PLANS[name]
    cluster_file = tmp_path / "cluster.json"
    config = _by_kind(plan, "ConfigMap")[0]["data"]
    cluster_file.write_text(config["cluster.json"])
    jobs = {j["metadata"]["name"]: j for j in _by_kind(plan, "Job")}
    assert list(jobs) == [task.name for task in plan.tasks]  # one Job per task, named after it
    service = _by_kind(plan, "Service")[0]
    for task in plan.tasks:
        job = jobs[task.name]
        pod = job["spec"]["template"]["spec"]
        assert f"{pod['hostname']}.{pod['subdomain']}:{task.port}" == task.address
        assert pod["hostname"] == task.name and pod["subdomain"] == service["metadata"]["name"]
        env = _pod_env(config, job, cluster_file)
        assert env["TFCLUSTER_TASK_NAME"] == task.name
        assert resolve_tf_config(env) == plan.tf_config(task)
        planned = plan.task_env(task)
        del planned["TF_CONFIG"]
        assert {k: env[k] for k in planned} == planned  # TFCLUSTER_IS_CHIEF too: each task's own, no wrapper
        # A program other than the entrypoint (which reads the cluster file) gets its own task's TF_CONFIG.
        assert ("TF_CONFIG" in env) is (not task.runs_entrypoint)
        assert task.runs_entrypoint is (task.command == CONTAINER_ENTRYPOINT)
        if "TF_CONFIG" in env:
            assert json.loads(env["TF_CONFIG"]) == plan.tf_config(task)
        container = pod["containers"][0]
        args = [expand(a, env) for a in container.get("args", [])]
        assert "command" not in container  # the image's ENTRYPOINT (tini) stays PID 1
        head = agent_head(task)
        under_agent = args[:len(head)] == head  # where the image holds tfcluster (the test below)
        assert container["image"] == task.image and args[len(head) if under_agent else 0:] == task.command
        assert bool(task.standby_command) is (task.runs_entrypoint and task.type.trains and plan.spec.restart.warm)
        assert under_agent is (bool(task.command) and (task.runs_entrypoint or task.image.startswith("tfcluster-worker:")))
        assert container["ports"][0]["containerPort"] == task.port


@pytest.mark.parametrize(("role", "agent"), [
    ({}, True),  # the entrypoint
    ({"command": ["python", "train.py"]}, True),  # the user's own program (`tfcluster run train.py`)
    ({"command": ["python", "train.py"], "image": "registry.example.com/tfcluster-worker:2"}, True),
    ({"command": ["python", "train.py"], "image": "tensorflow/tensorflow:2.15.0"}, False),  # no tfcluster in it
    ({"command": ["python", "train.py"], "replaces_entrypoint": True}, False),  # no tini in front to reap
    ({"command": []}, False),  # the image's own CMD: not known here
])
def test_a_tasks_program_runs_under_its_agent_where_the_image_holds_tfcluster_and_tini_stays_pid_1(
        role: dict[str, Any], agent: bool) -> None:
    plan = plan_for({"name": "own", "roles": {"worker": {"replicas": 1, **role}}})
    [job] = _by_kind(plan, "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    program = container.get("command", container.get("args", []))
    head = agent_head(plan.tasks[0])
    assert (program[:len(head)] == head) is agent
    assert program[len(head) if agent else 0:] == plan.tasks[0].command
    (tfjob,) = [doc for doc in _docs(render_tfjob(plan)) if doc["kind"] == "TFJob"]
    replica = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert replica.get("command", replica.get("args", [])) == plan.tasks[0].command  # the operator's pods: no endpoint


#: What every task's Job is: suspended until the run's supervisor starts it, one pod, never run again by Kubernetes.
TASK_JOB_SPEC = {"suspend": True, "completions": 1, "parallelism": 1, "backoffLimit": 0, "podReplacementPolicy": "Failed",
                 "podFailurePolicy": {"rules": [{"action": "FailJob",
                                                 "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}}


def test_each_task_is_a_suspended_job_of_one_pod_that_kubernetes_never_restarts() -> None:
    plan = PLANS["pss"]
    jobs = _by_kind(plan, "Job")
    assert [j["metadata"]["name"] for j in jobs] == [
        "pss-chief-0", "pss-worker-0", "pss-worker-1", "pss-ps-0", "pss-ps-1", "pss-evaluator-0"]
    for job in jobs:
        spec = {k: v for k, v in job["spec"].items() if k not in ("template", "ttlSecondsAfterFinished")}
        assert spec == TASK_JOB_SPEC  # no completionMode, successPolicy, activeDeadlineSeconds; a disruption fails it
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize("restart", [
    {"policy": "never"},
    {"policy": "exit-code", "max_restarts": 3, "max_preemptions": 0},
    {"policy": "always", "rules": [{"exit_codes": [3], "action": "fail"}, {"log_pattern": "ECC", "action": "restart"}]},
])
def test_restarts_deadline_and_success_are_the_supervisors_not_the_jobs(restart: dict[str, Any]) -> None:
    """Restart policy, budget, failure rules, deadline and success policy leave the task Jobs as they are: the
    run's supervisor (``launcher.supervision``) decides them, the same on every backend."""
    roles = {"chief": {}, "worker": {"replicas": 2}}
    plain = plan_for({"name": "r", "roles": roles})
    chosen = plan_for({"name": "r", "roles": roles, "restart": restart, "deadline_seconds": 60,
                       "success_policy": "all-workers"})
    assert _by_kind(chosen, "Job") == _by_kind(plain, "Job")


def test_save_grace_maps_to_the_pods() -> None:
    plan = plan_for({"name": "g", "roles": {"chief": {}, "worker": {"replicas": 2}},
                     "checkpoint": {"save_grace_seconds": 90}, "restart": {"max_preemptions": 0}})
    for job in _by_kind(plan, "Job"):
        assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 90


def test_ttl_after_finished_reaches_every_task_job() -> None:
    assert all(j["spec"]["ttlSecondsAfterFinished"] == 3600 for j in _by_kind(PLANS["mwms-evaluator"], "Job"))
    assert all("ttlSecondsAfterFinished" not in j["spec"] for j in _by_kind(PLANS["every-option"], "Job"))


@pytest.mark.parametrize("name", sorted(PLANS))
def test_pods_are_hardened_and_isolated(name: str) -> None:
    plan = PLANS[name]
    accounts = _by_kind(plan, "ServiceAccount")
    own = plan.spec.kubernetes.service_account
    if own:  # the user's existing account: not created, not changed; its own token setting applies
        assert not accounts
        identity = {"serviceAccountName": own}
    else:
        (account,) = accounts
        assert account["automountServiceAccountToken"] is False
        identity = {"serviceAccountName": account["metadata"]["name"], "automountServiceAccountToken": False}
    rights = [(o["kind"], o["metadata"]["name"]) for o in _objects(plan) if o["kind"].endswith(("Role", "RoleBinding"))]
    assert rights == [("Role", f"{plan.name}-supervisor"), ("RoleBinding", f"{plan.name}-supervisor")]  # its own only
    for job in _by_kind(plan, "Job"):
        pod = job["spec"]["template"]["spec"]
        assert {k: v for k, v in pod.items() if k in ("serviceAccountName", "automountServiceAccountToken")} == identity
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for any_container in pod["containers"] + pod.get("initContainers", []):
            context = any_container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
        (container,) = pod["containers"]
        tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
        assert next(v for v in pod["volumes"] if v["name"] == tmp["name"]) == {"name": tmp["name"], "emptyDir": {}}
        assert all("hostPort" not in p for p in container["ports"])
    (policy,) = _by_kind(plan, "NetworkPolicy")
    own = {"matchLabels": {"tfcluster.io/cluster": plan.name}}
    assert policy["spec"]["podSelector"] == own and policy["spec"]["policyTypes"] == ["Ingress"]
    rule, stacks = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": own}]
    assert sorted(p["port"] for p in rule["ports"]) == sorted({t.port for t in plan.tasks})
    # the run's supervisor pod may reach the tasks' stack endpoints, nothing else of them
    assert stacks == {"from": [{"podSelector": {"matchLabels": {naming.LABEL_SUPERVISOR: plan.name}}}],
                      "ports": [{"protocol": "TCP", "port": endpoint_wire.PORT}]}
    (service,) = _by_kind(plan, "Service")
    assert service["spec"]["clusterIP"] == "None"  # headless: no virtual IP, no exposure


def _supervisor(plan: Plan, kind: str) -> dict[str, Any]:
    [found] = [o for o in _objects(plan) if o["kind"] == kind and o["metadata"]["name"] == naming.supervisor_name(plan.name)]
    return found


def test_the_supervisor_pod_runs_the_one_supervisor_process_on_the_runs_config_map() -> None:
    """``KIND NAMESPACE/NAME --adopt``: ``KubernetesBackend.state_of`` reads the run's ConfigMap in the pod's own
    namespace (Kubernetes expands ``$(TFCLUSTER_NAMESPACE)``, its downward API variable), and a replacement pod
    adopts the tasks its predecessor left."""
    plan = PLANS["pss"]
    pod = _supervisor(plan, "Job")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["args"] == ["python", "-m", "launcher.backends.supervisor_process", "k8s",
                                 "$(TFCLUSTER_NAMESPACE)/pss", "--adopt"]
    env = {e["name"]: e for e in container["env"]}
    assert env["TFCLUSTER_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert [expand(a, {"TFCLUSTER_NAMESPACE": "team-a"}) for a in container["args"]][4] == "team-a/pss"
    assert "command" not in container  # the image's tini stays PID 1: SIGTERM reaches the supervisor
    assert not any(o["metadata"]["name"] == naming.supervisor_name("off") for o in manifests(
        plan_for({"name": "off", "roles": {"worker": {"replicas": 1}}, "kubernetes": {"supervisor": False}})))


def test_the_supervisor_pods_memory_grows_with_a_large_run() -> None:
    """Up to 100 tasks its container has the fixed requests and limits; past that, memory for each task (measured:
    308 MiB of working set for 1,000 tasks, near the fixed 384 Mi limit), so a large run's supervisor is not OOM
    killed."""
    from kubernetes.utils import parse_quantity

    def memory(tasks: int) -> tuple[int, int]:
        plan = plan_for({"name": "big", "roles": {"chief": {}, "worker": {"replicas": tasks - 1}}})
        [container] = _supervisor(plan, "Job")["spec"]["template"]["spec"]["containers"]
        return tuple(int(parse_quantity(container["resources"][side]["memory"])) >> 20  # type: ignore[return-value]
                     for side in ("requests", "limits"))

    assert memory(3) == memory(100) == (128, 384)
    assert memory(1000) == (409, 834)


def test_the_supervisor_pod_is_placed_by_its_own_setting_never_by_the_tasks() -> None:
    """The tasks' node selector and tolerations (a GPU pool, simulated nodes) are not the supervisor pod's: it
    gets ``kubernetes.supervisor_placement`` (none by default: the scheduler's choice), and the run's pull secrets."""
    pod = _supervisor(PLANS["every-option"], "Job")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == [{"key": "dedicated", "value": "system", "effect": "NoSchedule"}]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    gpu = plan_for({"name": "gpu", "roles": {"worker": {"replicas": 1}}, "kubernetes": {
        "node_selector": {"type": "kwok"},
        "tolerations": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]}})
    task = _by_kind(gpu, "Job")[0]["spec"]["template"]["spec"]
    assert task["nodeSelector"] == {"type": "kwok"} and task["tolerations"]
    supervisor = _supervisor(gpu, "Job")["spec"]["template"]["spec"]
    assert not {"nodeSelector", "tolerations", "imagePullSecrets"} & set(supervisor)


def test_the_supervisors_role_allows_what_its_runtime_does_and_nothing_more() -> None:
    """Read from ``runtime.KubernetesRuntime`` and ``cluster_state.ConfigMapStore``: pods listed and watched
    (``watched.RunObjects``), read, deleted (``stop``); their logs (``output``); Jobs listed and watched (the plan's event token, ``watched``), read,
    unsuspended (``start``) and replaced (deleted, created: ``fresh_copy``) by name where Kubernetes allows names;
    the ConfigMap read and updated (the status, the stacks); the run's PodGroup patched by name (its ``minCount``:
    ``gang.GangSize``), none without a gang. No ``pods/exec`` (a task's stacks come from its stack
    endpoint), no secrets, no wildcards, no other ConfigMap or Job, no pod created or patched."""
    plan = PLANS["pss"]
    assert _supervisor(plan, "Role")["rules"] == role_rules(plan) == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "watch", "create"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": sorted(t.name for t in plan.tasks),
         "verbs": ["get", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["pss-tfconfig"], "verbs": ["get", "update"]},
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"], "resourceNames": ["pss-gang"], "verbs": ["patch"]},
    ]
    assert role_rules(without_gang(plan)) == role_rules(plan)[:-1]
    binding = _supervisor(plan, "RoleBinding")
    assert binding["roleRef"]["name"] == naming.supervisor_name("pss")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": naming.supervisor_name("pss"), "namespace": "default"}]
    pod = _supervisor(plan, "Job")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == naming.supervisor_name("pss") and pod["automountServiceAccountToken"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    tasks = {job["spec"]["template"]["spec"]["securityContext"]["runAsUser"] for job in _by_kind(plan, "Job")
             if job["metadata"]["name"] != naming.supervisor_name("pss")}
    assert tasks == {TASK_UID} and pod["securityContext"]["runAsUser"] not in tasks  # not the tasks' uid
    assert pod["securityContext"]["runAsGroup"] != TASK_UID and "fsGroup" not in pod["securityContext"]
    assert pod["containers"][0]["workingDir"] == pod["containers"][0]["env"][-1]["value"] == "/tmp"  # HOME: emptyDir
    context = pod["containers"][0]["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}


def _checkpoint_mounts(plan: Plan) -> set[tuple[str, str | None]]:
    result = set()
    for job in _by_kind(plan, "Job"):
        pod = job["spec"]["template"]["spec"]
        claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in pod["volumes"]}
        for mount in pod["containers"][0]["volumeMounts"]:
            if claims.get(mount["name"]):
                result.add((mount["mountPath"], claims[mount["name"]]))
    return result


def test_checkpoint_storage_choices() -> None:
    created = PLANS["created-claim"]
    (claim,) = _by_kind(created, "PersistentVolumeClaim")
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}}, "storageClassName": "nfs-client"}
    assert _checkpoint_mounts(created) == {("/checkpoints", "rwx-checkpoints")}
    existing = PLANS["every-option"]
    assert not _by_kind(existing, "PersistentVolumeClaim")
    assert _checkpoint_mounts(existing) == {("/mnt/ckpt", "shared-ckpt"), ("/data", "imagenet")}  # + the user's
    url = PLANS["object-store"]
    assert not _by_kind(url, "PersistentVolumeClaim") and not _checkpoint_mounts(url)
    assert url.run_config.checkpoint_dir == "gs://bucket/runs"


def test_kubernetes_options_reach_every_pod() -> None:
    plan = PLANS["every-option"]
    chief, worker, worker_1 = (j["spec"]["template"] for j in _by_kind(plan, "Job"))
    for template in (chief, worker, worker_1):
        pod = template["spec"]
        assert template["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "opts", "kueue.x-k8s.io/queue-name": "gpu"}
        assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]
        assert pod["imagePullSecrets"] == [{"name": "regcred"}] and pod["schedulerName"] == "volcano"
        assert pod["priorityClassName"] == "team-high"
        assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "wandb"}}]
        own = ("tmp", "tfcluster", "checkpoints")
        assert [v for v in pod["volumes"] if v["name"] not in own] == [
            {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}},
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "creds", "secret": {"secretName": "gcs-key", "defaultMode": 0o400}}]
        assert [m for m in pod["containers"][0]["volumeMounts"] if m["name"] not in own] == [
            {"name": "data", "mountPath": "/data", "readOnly": True},
            {"name": "cache", "mountPath": "/home/tfcluster/.cache", "readOnly": False, "subPath": "tf"},
            {"name": "creds", "mountPath": "/var/secrets/gcs", "readOnly": True}]
    supervisor = _supervisor(plan, "Job")
    assert supervisor["spec"]["template"]["spec"]["priorityClassName"] == "team-high"  # the tasks' class: not evicted for them
    assert all("priorityClassName" not in j["spec"]["template"]["spec"] for j in _by_kind(PLANS["demo"], "Job"))
    (board, *_) = tensorboard_objects(plan)  # TensorBoard reads the log dir only
    assert {v["name"] for v in board["spec"]["template"]["spec"]["volumes"]} == {"tmp", "checkpoints"}
    assert chief["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "500m", "memory": "2Gi"}}
    assert worker["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "8Gi"},
        "limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"},
    }
    assert all(o["metadata"]["namespace"] == "team-a" for o in manifests(plan))


def test_labels_identify_cluster_role_and_run() -> None:
    plan = plan_for(DEMO, run_id="20261122-abc")
    for obj in manifests(plan):
        labels = obj["metadata"]["labels"]
        assert labels.get("tfcluster.io/cluster", labels.get("tfcluster.io/supervisor")) == "demo"
        assert obj["metadata"]["labels"]["tfcluster.io/run-id"] == "20261122-abc"
    for job, task in zip(_by_kind(plan, "Job"), plan.tasks, strict=True):
        own = {"tfcluster.io/role": task.type.value, "tfcluster.io/index": str(task.index), "tfcluster.io/task": task.name}
        for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
            assert {k: labels[k] for k in own} == own  # the runtime and describe find a task's Job and pods by them


def test_size_grows_linearly_and_no_tf_config_for_the_entrypoint() -> None:
    rendered = {n: KubernetesBackend.render(plan_for(workers(n))) for n in (10, 100, 1000)}
    sizes = {n: sum(map(len, files.values())) for n, files in rendered.items()}
    per_task_small = (sizes[100] - sizes[10]) / 90
    per_task_large = (sizes[1000] - sizes[100]) / 900
    assert per_task_large < 1.2 * per_task_small  # a few digits longer per name, nothing more
    assert per_task_large < 4096  # one task Job and one cluster.json entry per task
    text = "".join(rendered[1000].values())
    assert "TF_CONFIG" not in text and text.count("big-worker-999.big:2222") == 1  # the cluster written once
    config_map = yaml.safe_load_all(rendered[1000]["config.yaml"])
    data = next(o for o in config_map if o["kind"] == "ConfigMap")["data"]
    assert sum(map(len, data.values())) < 120 * 1000  # the one object that must fit 1 MiB grows by an address a task


def test_render_is_pure_and_does_not_import_the_client() -> None:
    code = (
        "import sys; from launcher import api; "
        "d = api.dry_run('examples/demo.yaml', 'k8s'); p = d.plan; assert d.files; "
        "from launcher.backends.kubernetes.manifests import render_tfjob; render_tfjob(p); "
        "assert 'kubernetes' not in sys.modules, 'client imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    assert KubernetesBackend.render(PLANS["demo"]) == KubernetesBackend.render(plan_for(DEMO))


def test_k8s_directory_is_the_rendered_demo() -> None:
    dry_run = KubernetesBackend.dry_run(plan_for(DEMO))
    rendered = {**dry_run.files, **dry_run.admin_files}
    on_disk = {p.name: p.read_text() for p in K8S_DIR.glob("*.yaml") if p.name != "rbac-launcher.yaml"}
    assert on_disk == rendered, "k8s/ is stale: run `tfcluster render examples/demo.yaml -b k8s -d k8s`"
    kustomization = yaml.safe_load(rendered["kustomization.yaml"])
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == sorted(set(dry_run.files) - {"kustomization.yaml"})
    assert admission_policy.FILE in on_disk and admission_policy.FILE not in kustomization["resources"]
    assert "rbac-launcher.yaml" not in kustomization["resources"]


def test_launcher_rbac_role_is_valid() -> None:
    docs = list(yaml.safe_load_all((K8S_DIR / "rbac-launcher.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]
    for doc in docs:
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


# --- TFJob export -------------------------------------------------------------

#: The non-pod part of the kubeflow.org/v1 TFJob CRD schema, transcribed from
#: kubeflow/training-operator manifests/base/crds/kubeflow.org_tfjobs.yaml
#: (controller-gen v0.14.0); the pod templates are core PodTemplateSpecs, checked below with the Kubernetes schemas.
TFJOB_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "kubeflow.org/v1"},
        "kind": {"const": "TFJob"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["tfReplicaSpecs"],
            "properties": {
                "enableDynamicWorker": {"type": "boolean"},
                "runPolicy": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "activeDeadlineSeconds": {"type": "integer"},
                        "backoffLimit": {"type": "integer"},
                        "cleanPodPolicy": {"enum": ["All", "Running", "None"]},
                        "schedulingPolicy": {"type": "object"},
                        "suspend": {"type": "boolean"},
                        "ttlSecondsAfterFinished": {"type": "integer"},
                    },
                },
                "successPolicy": {"enum": ["", "AllWorkers"]},
                "tfReplicaSpecs": {
                    "type": "object",
                    "propertyNames": {"enum": ["Chief", "Worker", "PS", "Evaluator", "Master"]},
                    "additionalProperties": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["template"],
                        "properties": {
                            "replicas": {"type": "integer", "minimum": 1},
                            "restartPolicy": {"enum": ["Always", "OnFailure", "Never", "ExitCode"]},
                            "template": {"type": "object"},
                        },
                    },
                },
            },
        },
    },
}


@pytest.mark.parametrize("name", ["demo", "pss", "every-option", "mwms-evaluator"])
def test_tfjob_export_is_well_formed(name: str) -> None:
    plan = PLANS[name]
    files = render_tfjob(plan)
    docs = _docs(files)
    (tfjob,) = [d for d in docs if d["kind"] == "TFJob"]
    jsonschema.validate(tfjob, TFJOB_SCHEMA)
    for doc in docs:
        if doc["kind"] != "TFJob":
            kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
    replicas = tfjob["spec"]["tfReplicaSpecs"]
    counts = {role.title() if role != "ps" else "PS": n for role, n in _role_counts(plan).items()}
    assert {k: v["replicas"] for k, v in replicas.items()} == counts
    for replica in replicas.values():
        for version in KUBERNETES_VERSIONS:
            wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": replica["template"]}
            kubernetes_validate.validate(wrapped, version, strict=True)
        (container,) = replica["template"]["spec"]["containers"]
        assert container["name"] == "tensorflow"  # the operator's default container name
        assert "TF_CONFIG" not in json.dumps(container)  # the operator sets it
    kustomization = yaml.safe_load(files["kustomization.yaml"])
    assert sorted(kustomization["resources"]) == sorted(set(files) - {"kustomization.yaml"})


def test_tfjob_rejects_what_the_crd_rejects() -> None:
    tfjob = next(d for d in _docs(render_tfjob(PLANS["demo"])) if d["kind"] == "TFJob")
    tfjob["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(tfjob, TFJOB_SCHEMA)


def _role_counts(plan: Plan) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task in plan.tasks:
        counts[task.type.value] = counts.get(task.type.value, 0) + 1
    return counts


def test_spec_catalogue_covers_every_role_mix() -> None:
    mixes = {tuple(sorted(_role_counts(p))) for p in PLANS.values()}
    assert {("chief", "worker"), ("worker",), ("chief", "evaluator", "worker"), ("chief", "evaluator", "ps", "worker")} <= mixes
    assert set(SPECS) <= set(PLANS)


@pytest.mark.parametrize("fmt", ["native", "tfjob"])
def test_cli_render_writes_an_applyable_directory(fmt: str, cli, tmp_path: Path) -> None:
    result = cli.invoke(main, ["render", str(DEMO), "-b", "k8s", "-d", str(tmp_path), "--format", fmt])
    assert result.exit_code == 0, result.output
    kustomization = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    assert all((tmp_path / name).is_file() for name in kustomization["resources"])
    assert ("tfjob.yaml" in kustomization["resources"]) == (fmt == "tfjob")


def test_a_cluster_too_big_for_a_config_map_is_a_spec_error(write_spec, cli) -> None:
    name = "x" * (63 - len("-worker-9999"))  # the longest name 10,000 workers allow
    spec = write_spec({"name": name, "roles": {"chief": {}, "worker": {"replicas": 10000}}})
    result = cli.invoke(main, ["dry-run", str(spec), "-b", "k8s", "-o", "json"])
    assert result.exit_code == 2
    assert "roles.worker.replicas: the cluster description is" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", sorted(set(PLANS) - {"1000-workers"}))
def test_tensorboard_objects_validate_against_kubernetes_openapi(name: str, version: str) -> None:
    board = tensorboard_objects(PLANS[name])
    assert [o["kind"] for o in board] == ["Deployment", "Service", "NetworkPolicy"]
    for obj in board:
        kubernetes_validate.validate(obj, version, strict=True)


def test_tensorboard_objects_are_hardened_apart_from_the_tasks_and_held_by_the_config_map() -> None:
    plan = PLANS["demo"]
    deployment, service, policy = tensorboard_objects(plan)
    [config_map] = _by_kind(plan, "ConfigMap")
    assert json.loads(config_map["data"]["tensorboard.json"]) == [deployment, service, policy]
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert naming.LABEL_CLUSTER not in labels  # not selected by the run's Service, NetworkPolicy or status
    assert deployment["spec"]["selector"]["matchLabels"] == labels == service["spec"]["selector"]
    [container] = pod["spec"]["containers"]
    assert container["args"][:3] == ["python", "-m", "tensorboard.main"]
    assert container["args"][3:5] == ["--logdir_spec", "demo:/checkpoints/tensorboard"]
    assert container["securityContext"]["readOnlyRootFilesystem"] and pod["spec"]["securityContext"]["runAsNonRoot"]
    assert not pod["spec"]["automountServiceAccountToken"]
    assert {"name": "checkpoints", "mountPath": "/checkpoints", "readOnly": True} in container["volumeMounts"]
    assert service["spec"]["type"] == "ClusterIP" and [p["port"] for p in service["spec"]["ports"]] == [6006]
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"] == []  # no pod: port-forward only


def test_no_tensorboard_objects_when_tensorboard_is_off() -> None:
    plan = plan_for({"name": "off", "roles": {"worker": {"replicas": 2}}, "tensorboard": {"enabled": False}})
    assert tensorboard_objects(plan) == []
    assert "tensorboard.json" not in _by_kind(plan, "ConfigMap")[0]["data"]


def test_volumes_that_cannot_be_mounted_as_written_are_one_line_each_before_anything_starts(write_spec) -> None:
    spec = write_spec({
        "name": "vols",
        "workspace": ".",
        "roles": {"worker": {"replicas": 2}},
        "kubernetes": {
            "registry": "registry.example.com",
            "volumes": [
                {"name": "data", "nfs": {"server": "nfs.example.com", "path": "/exports"}},
                {"name": "data", "emptyDir": {}},
                {"name": "checkpoints", "emptyDir": {}},
                {"name": "none"},
                {"name": "two", "emptyDir": {}, "secret": {"secretName": "s"}},
                {"name": "typo", "persistentVolumeclaim": {"claimName": "c"}},
                {"name": "flat", "hostPath": "/srv"},
            ],
            "volume_mounts": [
                {"name": "data", "mount_path": "/checkpoints/data"},
                {"name": "data", "mount_path": "/etc"},
                {"name": "data", "mount_path": "/workspace"},
                {"name": "data", "mount_path": "/data"},
                {"name": "missing", "mount_path": "/data/"},
                {"name": "data", "mount_path": "relative"},
            ],
        },
    })
    lines = spec.read_text().splitlines()
    result = subprocess.run([sys.executable, "-m", "launcher", "validate", str(spec), "-b", "k8s"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = result.stderr.splitlines()
    found = {e.split(": ", 2)[1]: (int(e.split(":")[1]), e.split(": ", 2)[2]) for e in errors}
    expected = {
        "kubernetes.volumes.3": "exactly one source",
        "kubernetes.volumes.4": "(found emptyDir, secret)",
        "kubernetes.volumes.5": "(found persistentVolumeclaim); did you mean persistentVolumeClaim?",
        "kubernetes.volumes.6": "hostPath must be a mapping",
        "kubernetes.volume_mounts.5.mount_path": "must be an absolute path",
    }
    assert len(errors) == len(expected), errors  # field errors first: the rules run on a field-valid spec
    for path, text in expected.items():
        line, message = found[path]
        assert text in message, (path, message)
        assert path.rsplit(".", 1)[-1].isdigit() or lines[line - 1].strip().startswith(("-", path.rsplit(".", 1)[-1]))
    data = yaml.safe_load(spec.read_text())
    data["kubernetes"]["volumes"][3:] = []
    data["kubernetes"]["volume_mounts"][5:] = []
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    result = subprocess.run([sys.executable, "-m", "launcher", "validate", str(spec), "-b", "k8s"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert [e.split(": ", 1)[1] for e in result.stderr.splitlines()] == [
        "kubernetes.volumes.1.name: a second volume named 'data'",
        "kubernetes.volume_mounts.4.name: names no volume of kubernetes.volumes (defined: checkpoints, data)",
        "kubernetes.volume_mounts.4.mount_path: a second mount at /data",
        "kubernetes.volumes.2.name: 'checkpoints' is a volume tfcluster mounts itself; rename it",
        "kubernetes.volume_mounts.0.mount_path: /checkpoints/data overlaps /checkpoints, the checkpoint volume; "
        "mount it elsewhere",
        "kubernetes.volume_mounts.1.mount_path: /etc overlaps /etc/tfcluster, the cluster file; mount it elsewhere",
        "kubernetes.volume_mounts.2.mount_path: /workspace overlaps /workspace, the workspace; mount it elsewhere",
    ]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_volume_sources_a_spec_may_name_are_the_official_schemas(version: str) -> None:
    schema_dir = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}.0-local-strict"
    properties = json.loads((schema_dir / "volume-v1.json").read_text())["properties"]
    assert VOLUME_SOURCES == set(properties) - {"name"}


#: Three runs on one board: the demo (default log dir on its created claim), one with every Kubernetes option
#: (an existing claim at /mnt/ckpt, a relative log dir), one whose summaries go to a bucket (its credentials secret).
BOARD_RUNS = {
    "demo": plan_for(DEMO),
    "opts": plan_for({**SPECS["every-option"], "tensorboard": {"dir": "curves/tb"}, "kubernetes": {
        **SPECS["every-option"]["kubernetes"], "namespace": "default"}}),
    "bucket": plan_for({"name": "bucket", "roles": {"worker": {"replicas": 1}}, "tensorboard": {"dir": "gs://logs/bucket"},
                        "kubernetes": {"env_from_secrets": ["gcs-key", "wandb"]}}),
}


def _shared_board(names: list[str]) -> list[dict[str, Any]]:
    """``shared_board`` as the backend calls it: each run by its plan, the first one's checked board as template."""
    first = BOARD_RUNS[names[0]]
    template = checked_board(first, _by_kind(first, "ConfigMap")[0]["data"])
    return shared_board([BoardRun.of(BOARD_RUNS[name]) for name in names], template)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_shared_board_validates_against_kubernetes_openapi(version: str) -> None:
    board = _shared_board(sorted(BOARD_RUNS))
    assert [o["kind"] for o in board] == ["Deployment", "Service", "NetworkPolicy"]
    for obj in board:
        kubernetes_validate.validate(obj, version, strict=True)


def test_shared_board_mounts_each_claim_read_only_at_its_own_path_and_reads_buckets_as_they_are() -> None:
    deployment, service, policy = _shared_board(["bucket", "demo", "opts"])
    name = naming.shared_tensorboard_name(["opts", "demo", "bucket"])
    assert re.fullmatch(r"tfcluster-tensorboard-[0-9a-f]{10}", name)
    assert {o["metadata"]["name"] for o in (deployment, service, policy)} == {name}
    pod = deployment["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert container["args"][3:5] == [
        "--logdir_spec", "bucket:gs://logs/bucket,demo:/runs/demo/tensorboard,opts:/runs/opts/curves/tb"]
    assert [m for m in container["volumeMounts"] if m["name"] != "tmp"] == [
        {"name": "demo-checkpoints", "mountPath": "/runs/demo", "readOnly": True},
        {"name": "opts-checkpoints", "mountPath": "/runs/opts", "readOnly": True},
    ]
    assert [v for v in pod["spec"]["volumes"] if v["name"] != "tmp"] == [
        {"name": "demo-checkpoints", "persistentVolumeClaim": {"claimName": "demo-checkpoints", "readOnly": True}},
        {"name": "opts-checkpoints", "persistentVolumeClaim": {"claimName": "shared-ckpt", "readOnly": True}},
    ]
    assert container["envFrom"] == [{"secretRef": {"name": n}} for n in ("gcs-key", "wandb")]  # union, once each
    # The pods are a board's, selected by the board's own labels, hardened as a single run's board.
    labels = naming.tensorboard_labels(name)
    assert pod["metadata"]["labels"] == labels == deployment["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"] == []  # no pod: port-forward only
    assert container["securityContext"]["readOnlyRootFilesystem"] and pod["spec"]["securityContext"]["runAsNonRoot"]
    assert not pod["spec"]["automountServiceAccountToken"]
    # The first run's stored board is the template: its pod settings and its objects' labels (so `down bucket` finds it).
    [template] = [o for o in tensorboard_objects(BOARD_RUNS["bucket"]) if o["kind"] == "Deployment"]
    assert deployment["metadata"]["labels"] == template["metadata"]["labels"]
    assert {k: v for k, v in pod["spec"].items() if k not in ("containers", "volumes")} == {
        k: v for k, v in template["spec"]["template"]["spec"].items() if k not in ("containers", "volumes")}
    assert container["image"] == template["spec"]["template"]["spec"]["containers"][0]["image"]


def test_shared_board_takes_the_node_settings_of_the_first_run() -> None:
    deployment = _shared_board(["opts", "demo"])[0]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert spec["imagePullSecrets"] == [{"name": "regcred"}] and spec["serviceAccountName"] == "opts-runner"
    assert spec["containers"][0]["image"] == "registry.example.com/team/tf:1.0"
    assert deployment["metadata"]["labels"][naming.LABEL_CLUSTER] == "opts"


def test_shared_board_refuses_a_log_dir_it_cannot_mount() -> None:
    outside = BoardRun("stray", "/elsewhere/tb", "/checkpoints", "stray-checkpoints")
    template = tensorboard_objects(BOARD_RUNS["demo"])
    with pytest.raises(LaunchError, match="'stray' writes its summaries to /elsewhere/tb, outside its checkpoint claim"):
        shared_board([BoardRun("demo", "/checkpoints/tensorboard", "/checkpoints", "demo-checkpoints"), outside], template)
    off = plan_for({"name": "off", "roles": {"worker": {"replicas": 1}}, "tensorboard": {"enabled": False}})
    with pytest.raises(LaunchError, match="tensorboard.enabled: false"):
        BoardRun.of(off)
    older = {"job.json": _by_kind(BOARD_RUNS["demo"], "ConfigMap")[0]["data"]["job.json"]}  # launched before boards
    with pytest.raises(LaunchError, match="ConfigMap demo-tfconfig holds no TensorBoard objects"):
        checked_board(BOARD_RUNS["demo"], older)


def test_a_shared_board_is_named_by_the_set_of_runs() -> None:
    assert naming.shared_tensorboard_name(["a", "b"]) == naming.shared_tensorboard_name(["b", "a", "b"])
    assert naming.shared_tensorboard_name(["a", "b"]) != naming.shared_tensorboard_name(["a", "bc"])
    assert naming.shared_tensorboard_name(["a", "b"]) != naming.shared_tensorboard_name(["ab"])
    assert len(naming.shared_tensorboard_name(["x" * 50] * 3 + ["y"])) == len("tfcluster-tensorboard-") + 10


def test_the_board_runs_in_the_lead_tasks_image_unless_tensorboard_image_names_one() -> None:
    roles = {"chief": {"image": "mine/chief:1"}, "worker": {"replicas": 2, "image": "mine/worker:1"}}
    for board, image in [({}, "mine/chief:1"), ({"image": "tfcluster-worker:latest"}, "tfcluster-worker:latest")]:
        plan = plan_for({"name": "img", "roles": roles, "tensorboard": board})
        [deployment] = [o for o in tensorboard_objects(plan) if o["kind"] == "Deployment"]
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image


def test_the_board_of_a_workspace_run_planned_again_runs_its_workspace_layer_and_no_other_image(tmp_path: Path) -> None:
    """Planned again from its ConfigMap, a workspace run has no workspace files to hash: its stored board may run a
    tag of its own workspace layer (and only that) instead of the base image."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    plan = plan_for({"name": "ws", "workspace": str(tmp_path), "command": ["python", "train.py"],
                     "roles": {"worker": {"replicas": 1}}, "kubernetes": {"registry": "registry.example.com"}})
    [config_map] = _by_kind(plan, "ConfigMap")
    again = planned_again("ws", config_map)
    assert again.board_image() != plan.board_image()  # the base image: the workspace digest is not in the ConfigMap
    assert checked_board(again, config_map["data"]) == json.loads(config_map["data"]["tensorboard.json"])
    for image in ("registry.example.com/tfcluster-workspace-other:0123456789abcdef", "registry.example.com/evil:1",
                  plan.board_image() + "0"):
        board = json.loads(config_map["data"]["tensorboard.json"])
        board[0]["spec"]["template"]["spec"]["containers"][0]["image"] = image
        with pytest.raises(LaunchError, match="not the board of run 'ws'"):
            checked_board(again, {**config_map["data"], "tensorboard.json": json.dumps(board)})


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_a_workspace_is_writable_through_a_copy_the_init_container_makes(tmp_path: Path, version: str) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    plan = plan_for({"name": "ws", "workspace": str(tmp_path), "command": ["python", "train.py"],
                     "roles": {"worker": {"replicas": 2, "resources": {"cpu": 1}}},
                     "kubernetes": {"registry": "registry.example.com"}})
    for doc in _docs(KubernetesBackend.render(applied_on(plan, version))):
        kubernetes_validate.validate(doc, version, strict=True)
    job, _ = _by_kind(plan, "Job")  # one per worker, alike but for the worker's name
    pod = job["spec"]["template"]["spec"]
    [seed], [task] = pod["initContainers"], pod["containers"]
    assert seed["image"] == task["image"] == plan.tasks[0].image and seed["resources"] == task["resources"]
    assert seed["securityContext"] == task["securityContext"] and task["securityContext"]["readOnlyRootFilesystem"]
    assert seed["command"] == ["cp", "-R", "/workspace/.", f"{seed['volumeMounts'][0]['mountPath']}/"]
    [volume] = [v for v in pod["volumes"] if v["name"] == seed["volumeMounts"][0]["name"]]
    assert volume == {"name": "workspace", "emptyDir": {}}
    assert {"name": "workspace", "mountPath": "/workspace"} in task["volumeMounts"]
    assert "initContainers" not in _by_kind(PLANS["demo"], "Job")[0]["spec"]["template"]["spec"]  # no workspace
    # The layer's tag survives a rebuilt base: nodes check the registry's digest rather than keep an old pull.
    assert seed["imagePullPolicy"] == task["imagePullPolicy"] == "Always"
    assert _by_kind(PLANS["demo"], "Job")[0]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] != "Always"


@pytest.mark.parametrize(("image", "policy"), [
    ("tfcluster-worker:latest", "IfNotPresent"),  # `tfcluster build`'s, loaded into the nodes: never on Docker Hub
    ("tfcluster-worker:latest-gpu", "IfNotPresent"),
    ("tfcluster-worker", "IfNotPresent"),
    ("registry.example.com/tfcluster-worker:latest", "Always"),  # pushed there: Kubernetes' default
    ("mnist:latest", "Always"),
    ("mnist", "Always"),
    ("registry.example.com/mnist:1.0", "IfNotPresent"),
    ("mnist@sha256:" + "a" * 64, "IfNotPresent"),
])
def test_the_pull_policy_runs_a_loaded_worker_image_and_is_kubernetes_default_otherwise(image: str, policy: str) -> None:
    plan = plan_for({"name": "img", "image": image, "roles": {"worker": {"replicas": 1}}})
    [job] = _by_kind(plan, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy
    [deployment] = [o for o in tensorboard_objects(plan) if o["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy
