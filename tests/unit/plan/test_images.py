"""Which image each task runs: the role's, the spec's, else the worker image of the role's variant; its user."""

from __future__ import annotations

import re
from typing import Any

import pytest

from helpers.paths import REPO
from launcher import api
from launcher.plan.images import TASK_UID, ImageVariant


def images(spec: dict[str, Any], backend: str) -> dict[str, str]:
    plan = api.plan(api.validate_data(spec, backend), backend, "run")
    return {task.name: task.image for task in plan.tasks}


def gpu_spec(**extra: Any) -> dict[str, Any]:
    return {"name": "g", "roles": {"chief": {}, "worker": {"replicas": 1, "resources": {"gpu": 1}}}, **extra}


@pytest.mark.parametrize("backend", ["compose", "k8s"])
def test_a_role_that_requests_gpus_runs_the_gpu_variant_by_default(backend: str) -> None:
    assert images(gpu_spec(), backend) == {"g-chief-0": "tfcluster-worker:latest", "g-worker-0": "tfcluster-worker:latest-gpu"}


def test_an_image_named_by_the_spec_or_the_role_wins_over_the_variant() -> None:
    assert set(images(gpu_spec(image="team/tf:1"), "k8s").values()) == {"team/tf:1"}
    named = gpu_spec()
    named["roles"]["worker"]["image"] = "team/tf-gpu:1"
    assert images(named, "k8s") == {"g-chief-0": "tfcluster-worker:latest", "g-worker-0": "team/tf-gpu:1"}


def test_the_variants_tags_are_the_ones_build_makes() -> None:
    assert [v.default_tag for v in ImageVariant] == ["tfcluster-worker:latest", "tfcluster-worker:latest-gpu"]


def test_the_worker_image_runs_as_the_user_the_backends_name() -> None:
    dockerfile = (REPO / "worker_image" / "Dockerfile").read_text()
    assert re.findall(r"^USER (.+)$", dockerfile, re.MULTILINE)[-1] == f"{TASK_UID}:{TASK_UID}"
    assert f"useradd --uid {TASK_UID} " in dockerfile and f"install -d -o {TASK_UID} -g {TASK_UID} /checkpoints" in dockerfile
