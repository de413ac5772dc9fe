"""The in-cluster supervisor of a Kubernetes run (``kubernetes.supervisor``, the default), against the fake API.

Its objects as rendered (the Role on the run's own objects, a restricted pod with stated resources, the harness's
round supervisor as its program), its rounds made as its own Role allows, the launcher's watch standing aside
while it runs and taking over once its Job failed, ``serve_rounds``' exits, and a launcher refused the rights
to create it told so in one line.
"""

from __future__ import annotations

import os
import signal
from typing import Any
from urllib.parse import unquote

import pytest
import yaml
from kubernetes import client

from fakes.kubernetes_api import FakeKubernetes, permission
from helpers.k8s_fake import backend_for, rbac_allowed
from helpers.k8s_specs import DEMO, dry_run_for, plan_for
from launcher.backends.kubernetes import backend as k8s_backend
from launcher.backends.kubernetes import supervisor_objects
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.errors import LaunchError
from launcher.supervision import harness
from launcher.supervision.status import SupervisorState

SPEC: dict[str, Any] = {**yaml.safe_load(DEMO.read_text()), "kubernetes": {"supervisor": True}}


def supervisor_rights(spec: dict[str, Any] = SPEC) -> tuple[set[tuple[str, str, str]], dict[tuple[str, str], set[str]]]:
    """The rendered Role's rights, and for the rules naming objects, ``{(resource, verb): names}``."""
    rules = supervisor_objects.rules(plan_for(spec))
    rights = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    named = {(r, v): set(rule["resourceNames"]) for rule in rules if "resourceNames" in rule
             for r in rule["resources"] for v in rule["verbs"]}
    return rights, named


def start_all(fake: FakeKubernetes) -> None:
    for job in ("demo-chief", "demo-worker"):
        fake.start_pods(job)


def current(fake: FakeKubernetes, task: str) -> str:
    return max(name for (plural, _, name) in fake.objects if plural == "pods" and name.startswith(task + "-"))


def test_the_supervisor_runs_the_harness_rounds_in_a_restricted_pod_with_stated_resources() -> None:
    plan = plan_for(SPEC)
    objects = supervisor_objects.objects(plan, harness.rounds_command(KubernetesBackend, "demo", python="python"))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ServiceAccount", "demo-supervisor"), ("Role", "demo-supervisor"), ("RoleBinding", "demo-supervisor"),
        ("Job", "demo-supervisor")]
    job = objects[-1]
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = container["args"]
    assert args[:4] == ["python", "-m", "launcher.supervision", harness.ROUNDS_FLAG] and args[-1] == "demo"
    assert harness.hosting(args[4]) is KubernetesBackend
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert pod["serviceAccountName"] == "demo-supervisor" and pod["automountServiceAccountToken"] is True
    assert job["spec"]["podReplacementPolicy"] == "Failed"  # never two supervisors at once
    assert "tfcluster.io/cluster" not in job["spec"]["template"]["metadata"]["labels"]  # not among the tasks
    opted_out = {**SPEC, "kubernetes": {"supervisor": False}}
    assert supervisor_objects.objects(plan_for(opted_out), ["python"]) == []
    files = KubernetesBackend.dry_run(plan).files
    assert "supervisor.yaml" in files and files["kustomization.yaml"].rstrip().endswith("- supervisor.yaml")
    rendered = [o for o in yaml.safe_load_all(files["supervisor.yaml"]) if o]
    assert rendered[-1]["spec"]["template"]["spec"]["containers"][0]["args"] == args


def test_the_supervisor_restarts_the_gang_and_cleans_up_as_its_own_role_allows(
        fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = backend_for(fake, gang_grace=0, linger=0)
    launcher.submit(dry_run_for(SPEC))
    start_all(fake)
    rights, named = supervisor_rights()
    fake.allowed, fake.requests[:] = rights, []
    monkeypatch.setenv("TFCLUSTER_NAMESPACE", "default")
    monkeypatch.setattr(k8s_backend, "connect", lambda context: client.ApiClient(client.Configuration(host=fake.url)))
    defaults = KubernetesBackend.__init__.__kwdefaults__  # the pod's backend, on the fake's clock, no grace
    monkeypatch.setitem(defaults, "clock", lambda: fake.now)
    monkeypatch.setitem(defaults, "gang_grace", 0)
    monkeypatch.setitem(defaults, "linger", 0)
    said: list[str] = []
    rounds = KubernetesBackend.rounds("demo", lambda seconds: None, said.append)
    assert rounds.round() == []
    asked = len(fake.requests)
    assert not rounds.over()
    assert fake.requests[asked:] == []  # over reads the Jobs and pods of a round that changed nothing
    fake.now += 5
    fake.finish_pod(current(fake, "demo-worker-1"), 137)
    actions = rounds.round()
    assert [a.split()[3] for a in actions] == [current(fake, "demo-chief-0"), current(fake, "demo-worker-0")]
    assert not rounds.over()
    fake.now += 10
    for job in ("demo-chief", "demo-worker"):
        fake.reconcile(job)
    fake.finish_pod(current(fake, "demo-chief-0"), 0)
    fake.reconcile("demo-chief")
    assert rounds.round() == ["run succeeded: deleted Job demo-worker"]
    fake.now += 5
    assert rounds.over()
    used = {permission(method, path) for method, path in fake.requests}
    assert used <= rights, used - rights
    for method, path in fake.requests:
        parts = unquote(path.split("?")[0]).strip("/").split("/")
        group, resource, verb = permission(method, path)
        if (resource, verb) in named:
            assert parts[-1] in named[resource, verb], (method, path)


def run_supervisor_pod(fake: FakeKubernetes, phase: str = "Running") -> None:
    """The supervisor Job's pod, as its Job controller and kubelet make it (the fake models Indexed Jobs only)."""
    job = fake.objects["jobs", "default", "demo-supervisor"]
    template = job["spec"]["template"]
    fake.create("pods", "default", {"metadata": {"name": "demo-supervisor-x7k2p", "labels": template["metadata"]["labels"]},
                                    "spec": template["spec"]})
    fake.objects["pods", "default", "demo-supervisor-x7k2p"]["status"]["phase"] = phase


def test_the_launchers_watch_stands_aside_only_while_a_supervisor_pod_runs(fake: FakeKubernetes) -> None:
    """While none runs (starting, its image not pulled, its Job failed) the watch supervises: never nobody."""
    backend = backend_for(fake, gang_grace=0)
    backend.submit(dry_run_for(SPEC))
    start_all(fake)
    fake.now += 5
    fake.finish_pod(current(fake, "demo-worker-1"), 137)
    assert backend.describe("demo").supervisor is SupervisorState.LOST  # its pod has not started
    run_supervisor_pod(fake)
    assert backend.describe("demo").supervisor is SupervisorState.ALIVE
    assert backend.watch_round("demo") == []  # the supervisor's to do
    supervisor = fake.objects["jobs", "default", "demo-supervisor"]
    supervisor.setdefault("status", {})["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    assert backend.describe("demo").supervisor is SupervisorState.LOST
    assert len(backend.watch_round("demo")) == 2  # the gang restart, by the watch now


class _Rounds:
    def __init__(self, *outcomes: Any):
        self.outcomes, self.rounds = list(outcomes), 0

    def __call__(self, name: str, pause: Any, say: Any) -> harness.Rounds:
        return harness.Rounds(round=self.round, over=lambda: self.outcomes[self.rounds - 1] == "over")

    def round(self) -> list[str]:
        self.rounds += 1
        outcome = self.outcomes[self.rounds - 1]
        if outcome == "fault":
            raise LaunchError("the API server does not answer")
        if outcome == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        return [f"round {self.rounds}"]


@pytest.mark.parametrize(("outcomes", "code", "rounds"), [
    (["", "", "over"], 0, 3),
    (["fault", "", "fault", "fault", "fault"], 1, 5),
    (["", "sigterm", ""], 128 + signal.SIGTERM, 2),
], ids=["over", "faults-in-a-row", "sigterm-leaves-the-run"])
def test_serve_rounds_exits_when_over_after_faults_in_a_row_or_on_sigterm(
        outcomes: list[str], code: int, rounds: int, capsys: pytest.CaptureFixture[str]) -> None:
    made = _Rounds(*outcomes)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert harness.serve_rounds("demo", made, round_seconds=0, faults=3) == code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert made.rounds == rounds
    assert "demo: round 1" in capsys.readouterr().out or outcomes[0] == "fault"


def test_a_launcher_refused_the_supervisors_rights_is_told_in_one_line_and_nothing_stays(fake: FakeKubernetes) -> None:
    fake.allowed = rbac_allowed() - {("rbac.authorization.k8s.io", "roles", "create")}
    backend = backend_for(fake)
    with pytest.raises(LaunchError) as refused:
        backend.submit(dry_run_for(SPEC))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("cannot create Role demo-supervisor: 403 Forbidden")
    assert "kubernetes.supervisor: false" in message and "removed the" in message
    fake.allowed = None
    fake.now += 5  # the garbage collector ends the Jobs deleted in the foreground
    assert not [key for key in fake.objects if key[0] in ("configmaps", "serviceaccounts", "jobs")]
    assert backend.describe("demo") is None
