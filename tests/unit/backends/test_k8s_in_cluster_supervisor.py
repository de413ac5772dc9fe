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
from launcher.backends import supervisor_process
from launcher.backends.kubernetes import apply, supervisor_objects
from launcher.backends.kubernetes import backend as k8s_backend
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.targets import BackendKind
from launcher.supervision import harness
from launcher.supervision.status import JobStatus, SupervisorState

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
    objects = supervisor_objects.objects(plan, supervisor_process.rounds_command(BackendKind.K8S, "demo", python="python"))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ServiceAccount", "demo-supervisor"), ("Role", "demo-supervisor"), ("RoleBinding", "demo-supervisor"),
        ("Job", "demo-supervisor")]
    job = objects[-1]
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = container["args"]
    assert args == ["python", "-m", "launcher.backends.supervisor_process", supervisor_process.ROUNDS_FLAG, "k8s", "demo"]
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


def run_supervisor_pod(fake: FakeKubernetes, phase: str = "Running", waiting: str | None = None) -> None:
    """The supervisor Job's pod, as its Job controller and kubelet make it (the fake models Indexed Jobs only);
    ``waiting``: its container's waiting reason (a Pending pod pulling its image, or backing off)."""
    job = fake.objects["jobs", "default", "demo-supervisor"]
    template = job["spec"]["template"]
    if ("pods", "default", "demo-supervisor-x7k2p") not in fake.objects:
        fake.create("pods", "default", {"metadata": {"name": "demo-supervisor-x7k2p",
                                                     "labels": template["metadata"]["labels"]},
                                        "spec": template["spec"]})
    status = fake.objects["pods", "default", "demo-supervisor-x7k2p"]["status"]
    status["phase"] = phase
    status["containerStatuses"] = [{"name": "supervisor", "state": {"waiting": {
        "reason": waiting, "message": f"{waiting} for image tfcluster-worker:latest"}} if waiting else {}}]


def test_the_launchers_watch_stands_aside_only_while_a_supervisor_pod_runs(fake: FakeKubernetes) -> None:
    """While none runs (starting, its image not pulled, its Job failed) the watch supervises: never nobody."""
    backend = backend_for(fake, gang_grace=0)
    backend.submit(dry_run_for(SPEC))
    start_all(fake)
    fake.now += 5
    fake.finish_pod(current(fake, "demo-worker-1"), 137)
    job = backend.describe("demo")
    assert (job.supervisor, job.supervisor_note) == (SupervisorState.LOST, "no supervisor pod")
    run_supervisor_pod(fake, "Pending", waiting="ContainerCreating")
    job = backend.describe("demo")
    assert job.supervisor is SupervisorState.STARTING and "ContainerCreating" in job.supervisor_note
    assert "(supervisor starting: demo-supervisor-x7k2p: ContainerCreating" in _header(job)
    run_supervisor_pod(fake, "Pending", waiting="ImagePullBackOff")
    job = backend.describe("demo")
    assert job.supervisor is SupervisorState.LOST
    assert job.supervisor_note == ("its pod cannot start: demo-supervisor-x7k2p: ImagePullBackOff "
                                   "ImagePullBackOff for image tfcluster-worker:latest")
    assert JobStatus.from_dict(job.to_dict()).supervisor_note == job.supervisor_note  # status -o json keeps it
    run_supervisor_pod(fake, "Pending", waiting="ContainerCreating")
    assert len(backend.watch_round("demo")) == 2  # while its pod only starts, the watch supervises: the gang restart
    run_supervisor_pod(fake)
    assert backend.describe("demo").supervisor is SupervisorState.ALIVE
    assert backend.watch_round("demo") == []  # the supervisor's to do
    supervisor = fake.objects["jobs", "default", "demo-supervisor"]
    supervisor.setdefault("status", {})["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    job = backend.describe("demo")
    assert job.supervisor is SupervisorState.LOST and job.supervisor_note == "its Job failed: BackoffLimitExceeded"



def _header(job: JobStatus) -> str:
    """The first line ``status`` prints of ``job``."""
    from rich.console import Console

    from launcher.cli.watch import status_view

    console = Console(width=400, record=True)
    console.print(status_view(job))
    return console.export_text().splitlines()[0]


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


def test_only_an_object_labelled_the_supervisors_gets_the_supervisor_hint(fake: FakeKubernetes) -> None:
    """By its label, not its name: someone's own ``build-supervisor`` account refused is a plain refusal."""
    fake.allowed = rbac_allowed() - {("", "serviceaccounts", "create")}
    backend = backend_for(fake)
    labels = naming.labels("demo", "manual")
    for name, extra, hinted in [("build-supervisor", {}, False), ("audit", {naming.LABEL_SUPERVISOR: "demo"}, True)]:
        account = {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": name, "namespace": "default", "labels": {**labels, **extra}}}
        with pytest.raises(LaunchError) as refused:
            apply.apply(backend.api, account, "default")
        assert ("kubernetes.supervisor: false" in str(refused.value)) is hinted, refused.value
