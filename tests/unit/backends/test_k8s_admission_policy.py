"""The admission policy holding a run's in-cluster supervisor to its run: rendered beside the manifests (never
applied by ``up``), valid for recent Kubernetes versions, its per-run params, and ``up``'s one line for a namespace
that has neither the policy nor the ``restricted`` Pod Security Standard. What the API server does with it, as
the supervisor's ServiceAccount: tests/e2e/test_k8s_e2e_admission.py."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from fakes.kubernetes_api import FakeKubernetes
from helpers.k8s_fake import backend_for, fake_fixture, rbac_allowed  # noqa: F401 - the fixture
from helpers.k8s_specs import DEMO, KUBERNETES_VERSIONS, REPO, SPECS, dry_run_for, manifests, plan_for
from launcher.backends.kubernetes import admission_policy
from launcher.backends.kubernetes.admission_policy import FILE, POLICY
from launcher.backends.kubernetes.manifests import objects
from launcher.cli.commands import main
from launcher.plan import naming


def _params(spec: dict[str, Any] | Any) -> dict[str, Any]:
    plan = plan_for(spec)
    return next(o for o in manifests(plan) if o["metadata"]["name"] == naming.admission_params_name(plan.name))


def test_render_writes_the_policy_beside_the_manifests_never_among_what_up_applies(
        cli: Any, tmp_path: Path) -> None:
    dry_run = dry_run_for(DEMO)
    docs = list(yaml.safe_load_all(dry_run.admin_files[FILE]))
    deletions = admission_policy.DELETIONS
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ValidatingAdmissionPolicy", POLICY), ("ValidatingAdmissionPolicyBinding", POLICY),
        ("ValidatingAdmissionPolicy", deletions), ("ValidatingAdmissionPolicyBinding", deletions)]
    assert FILE not in dry_run.files  # what submit applies
    assert (REPO / "k8s" / FILE).read_text() == dry_run.admin_files[FILE]  # the generic one an administrator applies
    assert dry_run_for(SPECS["every-option"]).admin_files == dry_run.admin_files  # the same for every run
    result = cli.invoke(main, ["render", str(DEMO), "-b", "k8s", "-d", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / FILE).read_text() == dry_run.admin_files[FILE]
    assert FILE not in yaml.safe_load((tmp_path / "kustomization.yaml").read_text())["resources"]
    shown = cli.invoke(main, ["dry-run", str(DEMO), "-b", "k8s"]).output
    assert f"would apply {FILE}" not in shown and f"a cluster admin applies {FILE} once" in shown, shown
    planned = cli.invoke(main, ["dry-run", str(DEMO), "-b", "k8s", "-o", "plan"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)  # the JSON alone: a warning on stderr is not part of it
    assert plan["admin_artifacts"] == dry_run.admin_files and FILE not in plan["artifacts"]


def test_without_an_in_cluster_supervisor_there_is_no_policy_and_no_params() -> None:
    dry_run = dry_run_for({**yaml.safe_load(DEMO.read_text()), "kubernetes": {"supervisor": False}})
    assert dry_run.admin_files == {}
    assert naming.admission_params_name("demo") not in {o["metadata"]["name"] for o in objects(dry_run.files)}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_policy_and_binding_validate_against_kubernetes_openapi(version: str) -> None:
    for doc in yaml.safe_load_all(admission_policy.document()):
        kubernetes_validate.validate(doc, version, strict=True)


def test_params_name_the_runs_images_and_task_account_and_come_before_its_supervisor() -> None:
    plan = plan_for(SPECS["every-option"])
    applied = manifests(plan)
    names = [o["metadata"]["name"] for o in applied]
    assert names.index(naming.admission_params_name(plan.name)) < names.index(naming.supervisor_name(plan.name))
    params = _params(SPECS["every-option"])
    jobs = [o for o in applied if o["kind"] == "Job" and naming.LABEL_CLUSTER in o["metadata"]["labels"]]
    images = {c["image"] for job in jobs for pod in [job["spec"]["template"]["spec"]]
              for c in pod["containers"] + pod.get("initContainers", [])}
    assert params["data"] == {"cluster": plan.name, "images": " ".join(sorted(images)),
                              "serviceAccount": jobs[0]["spec"]["template"]["spec"]["serviceAccountName"]}
    assert params["metadata"]["labels"][naming.LABEL_CLUSTER] == plan.name  # `down` deletes it with the run
    bindings = [d for d in yaml.safe_load_all(admission_policy.document()) if d["kind"].endswith("Binding")]
    for binding in bindings:
        assert binding["spec"]["paramRef"]["selector"]["matchLabels"].items() <= params["metadata"]["labels"].items()
    assert _params(SPECS["user-program-workers"])["data"]["serviceAccount"] == "trainer"  # the spec's own account


def test_policy_takes_the_run_from_the_supervisors_account_name() -> None:
    """The match condition is a regular expression RE2 and Python read alike; the run is the account's name
    without ``naming.supervisor_name``'s suffix."""
    for policy in admission_policy.policies():
        _run_of_account(policy["spec"])


def _run_of_account(spec: dict[str, Any]) -> None:
    pattern = re.search(r"matches\('(.+)'\)", spec["matchConditions"][0]["expression"]).group(1)  # type: ignore[union-attr]
    run = next(v["expression"] for v in spec["variables"] if v["name"] == "run")
    cut = int(re.search(r"- (\d+)\)$", run).group(1))  # type: ignore[union-attr]
    for name in ("demo", "a-supervisor", "x"):
        account = naming.supervisor_name(name)
        assert re.fullmatch(pattern, f"system:serviceaccount:team-a:{account}")
        assert account[:len(account) - cut] == name
    for user in ("system:serviceaccount:team-a:demo-runner", "alice-supervisor", "system:node:demo-supervisor"):
        assert not re.fullmatch(pattern, user), user


# --- up's one line ------------------------------------------------------------------------------------------------

def _up(fake: FakeKubernetes, caplog: pytest.LogCaptureFixture, **kubernetes: Any) -> list[str]:
    spec = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"supervisor": True, **kubernetes}}
    with caplog.at_level(logging.WARNING):
        backend_for(fake).submit(dry_run_for(spec))
    return [r.getMessage() for r in caplog.records if "admission policy" in r.getMessage()]


def _namespace(fake: FakeKubernetes, **labels: str) -> None:
    fake.create("namespaces", "", {"metadata": {"name": "default", "labels": labels}})


def test_up_says_in_one_line_when_the_namespace_has_neither_policy_nor_restricted_pods(
        fake: FakeKubernetes, caplog: pytest.LogCaptureFixture) -> None:
    _namespace(fake, **{admission_policy.PSS_ENFORCE: "baseline"})
    lines = _up(fake, caplog)
    assert lines == [admission_policy.unguarded_note("default")]
    assert "\n" not in lines[0] and FILE in lines[0]


@pytest.mark.parametrize("guard", ["binding", "restricted"])
def test_up_says_nothing_when_the_namespace_has_the_policy_or_restricted_pods(
        fake: FakeKubernetes, caplog: pytest.LogCaptureFixture, guard: str) -> None:
    if guard == "binding":
        _namespace(fake)
        fake.create("validatingadmissionpolicybindings", "", {"metadata": {"name": POLICY}, "spec": {}})
    else:
        _namespace(fake, **{admission_policy.PSS_ENFORCE: admission_policy.PSS_RESTRICTED})
    assert _up(fake, caplog) == []


def test_up_says_nothing_when_it_may_not_look(fake: FakeKubernetes, caplog: pytest.LogCaptureFixture) -> None:
    """A namespace's Role (k8s/rbac-launcher.yaml) reads neither the Namespace nor the binding: 403, no line,
    the launch goes on."""
    _namespace(fake)
    fake.allowed = rbac_allowed()
    assert _up(fake, caplog) == []
    assert fake.get("jobs", naming.supervisor_name("demo")) is not None
    assert ("GET", "/api/v1/namespaces/default") in fake.requests


def test_up_does_not_look_without_an_in_cluster_supervisor(fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    _namespace(fake)
    monkeypatch.setattr("launcher.backends.kubernetes.backend.harness.launch", lambda *args: None)
    assert _up(fake, caplog, supervisor=False) == []
    assert ("GET", "/api/v1/namespaces/default") not in fake.requests
