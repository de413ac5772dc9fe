"""Specs and plans shared by the Kubernetes tests: every role mix, every Kubernetes option, 1,000 workers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from helpers.paths import REPO  # noqa: I001
from launcher import api
from launcher.api import validate_data
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.manifests import objects
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.spec.models import GangPlacement

DEMO = REPO / "examples" / "demo.yaml"
#: Recent minor versions whose OpenAPI schemas the manifests must satisfy (kubernetes-validate ships 1.25-1.37).
KUBERNETES_VERSIONS = ("1.33", "1.35", "1.37")
#: The first of them whose API serves PodGroups (``scheduling.k8s.io/v1beta1``) and pods' ``schedulingGroup``: before
#: it, ``up`` finds no PodGroups and applies the run without its gang (``gang.fit``).
GANG_VERSION = "1.37"

SPECS: dict[str, dict[str, Any]] = {
    "workers-only": {"name": "wo", "roles": {"worker": {"replicas": 3}}},
    "single-task": {"name": "one", "roles": {"worker": {"replicas": 1}}},
    "user-program-workers": {
        "name": "byow",
        "command": ["python", "train.py", "--note", "$(HOME) $x \"q\"; exit 3"],
        "roles": {"worker": {"replicas": 3}},
        "kubernetes": {"service_account": "trainer"},
    },
    "user-program": {
        "name": "byo",
        "command": ["python", "train.py"],
        "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"command": []}, "evaluator": {}},
    },
    "mwms-evaluator": {
        "name": "mwe",
        "roles": {"chief": {}, "worker": {"replicas": 2}, "evaluator": {}},
        "restart": {"policy": "exit-code", "max_restarts": 2},
        "deadline_seconds": 3600,
    },
    "pss": {
        "name": "pss",
        "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 2, "port": 2223}, "evaluator": {}},
        "success_policy": "all-workers",
    },
    "every-option": {
        "name": "opts",
        "image": "registry.example.com/team/tf:1.0",
        "env": {"LOG_LEVEL": "debug", "LITERAL": "p$ss $(HOME) $$x"},
        "roles": {
            "chief": {"resources": {"cpu": 0.5, "memory": "2Gi"},
                      "command": ["python", "-m", "launcher.worker"], "args": ["--tag", "$(TFCLUSTER_TASK_TYPE)"]},
            "worker": {"replicas": 2, "resources": {"cpu": 4, "memory": "8Gi", "gpu": 1}, "env": {"NCCL_DEBUG": "INFO"}},
        },
        "collective": "nccl",
        "restart": {"policy": "never"},
        "checkpoint": {"dir": "/mnt/ckpt"},
        "kubernetes": {
            "namespace": "team-a",
            "node_selector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute", "toleration_seconds": 60}],
            "supervisor_placement": {"node_selector": {"pool": "system"},
                                     "tolerations": [{"key": "dedicated", "value": "system", "effect": "NoSchedule"}]},
            "image_pull_secrets": ["regcred"],
            "env_from_secrets": ["wandb"],
            "scheduler_name": "volcano",
            "priority_class": "team-high",
            "pod_annotations": {"scheduling.k8s.io/group-name": "opts", "kueue.x-k8s.io/queue-name": "gpu"},
            "labels": {"app.kubernetes.io/part-of": "vision", "cost-center": "ml-42"},
            "pod_labels": {"app": "opts", "sidecar.istio.io/inject": "false"},
            "volume_claim": {"name": "shared-ckpt"},
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}},
                        {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "creds", "secret": {"secretName": "gcs-key", "defaultMode": 0o400}}],
            "volume_mounts": [{"name": "data", "mount_path": "/data", "read_only": True},
                              {"name": "cache", "mount_path": "/home/tfcluster/.cache", "sub_path": "tf"},
                              {"name": "creds", "mount_path": "/var/secrets/gcs", "read_only": True}],
            "ttl_seconds_after_finished": None,
        },
    },
    "object-store": {"name": "gcs", "roles": {"chief": {}, "worker": {"replicas": 1}}, "checkpoint": {"dir": "gs://bucket/runs"}},
    "workspace": {  # shipped as a layer: pods get a writable copy of it from an init container
        "name": "ws",
        "workspace": str(REPO / "tests" / "data" / "workspace"),
        "command": ["python", "train.py"],
        "roles": {"chief": {}, "worker": {"replicas": 2, "resources": {"cpu": 1}}},
        "kubernetes": {"registry": "registry.example.com"},
    },
    "created-claim": {
        "name": "rwx",
        "roles": {"chief": {}, "worker": {"replicas": 1}},
        "kubernetes": {"volume_claim": {"size": "50Gi", "storage_class": "nfs-client"}},
    },
}


def workers(count: int) -> dict[str, Any]:
    return {"name": "big", "roles": {"chief": {}, "worker": {"replicas": count}}}


def plan_for(data: dict[str, Any] | Path, run_id: str = "manual") -> Plan:
    spec = validate_data(data) if isinstance(data, dict) else api.load_spec(data)
    return api.plan(spec, "k8s", run_id)


def dry_run_for(data: dict[str, Any] | Path, run_id: str = "manual") -> DryRun:
    """What ``submit`` applies for ``data`` on Kubernetes."""
    return KubernetesBackend.dry_run(plan_for(data, run_id))


def without_gang(plan: Plan) -> Plan:
    """``plan`` with ``kubernetes.gang: off``: what ``up`` applies on a cluster that serves no PodGroups."""
    kubernetes = plan.spec.kubernetes.model_copy(update={"gang": GangPlacement.OFF})
    return plan.model_copy(update={"spec": plan.spec.model_copy(update={"kubernetes": kubernetes})})


def applied_on(plan: Plan, version: str) -> Plan:
    """What ``up`` applies of ``plan`` on a cluster of ``version``: without the gang before ``GANG_VERSION``."""
    served = tuple(map(int, version.split("."))) >= tuple(map(int, GANG_VERSION.split(".")))
    return plan if served else without_gang(plan)


def all_plans() -> dict[str, Plan]:
    plans = {"demo": plan_for(DEMO), "1000-workers": plan_for(workers(1000))}
    plans.update({name: plan_for(data) for name, data in SPECS.items()})
    return plans


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of env values, command and args: ``$(VAR)`` of a variable defined
    earlier, ``$$`` is a literal ``$``, any other ``$`` stays (k8s.io/kubernetes third_party expansion)."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, value)


def manifests(plan: Plan) -> list[dict[str, Any]]:
    """Every object ``submit`` applies for ``plan`` (``KubernetesBackend.render``: the in-cluster supervisor's
    program included), in apply order."""
    return objects(KubernetesBackend.render(plan))
