"""The stall watchdog and stragglers on Kubernetes, through the real client against the fake API server.

The tests write the pods' logs (the events the built-in entrypoint prints,
with times on the fake's clock, as a pod's events carry its node's time),
move ``fake.now`` and act as the Job controller (``reconcile``), as in
test_k8s_backend.py. A stuck process cannot save: its pods ignore SIGTERM
and are killed (137) when their grace ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from fakes.kubernetes_api import IGNORES_SIGTERM, FakeKubernetes, permission
from helpers.k8s_fake import backend_for, pod_of, rbac_allowed, rbac_used, write
from helpers.k8s_specs import dry_run_for, plan_for
from launcher import api
from launcher.backends.kubernetes import backend as k8s_backend
from launcher.backends.kubernetes import in_cluster, supervisor_objects
from launcher.backends.kubernetes import runtime as k8s_runtime
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.manifests import CONFIG_MAP_LIMIT
from launcher.plan.planner import make_plan
from launcher.protocol.events import MANUAL_TOKEN, EpochEnd, Started, Step, StepTime, format_event
from launcher.supervision.stack_dumps import NO_STACKS, bounded_text
from launcher.supervision.stall import StallEvidence
from launcher.supervision.status import State

TASKS = ("st-chief-0", "st-worker-0", "st-worker-1")
FLOOR = 60


def launch(fake: FakeKubernetes, action: str = "restart", **spec: Any) -> KubernetesBackend:
    """Cluster ``st`` (chief + 2 workers, MultiWorkerMirrored) running, with a stall floor of ``FLOOR`` s; the
    watch's pause between a suspected stall's two stack samples moves the fake's clock."""
    backend = backend_for(fake, pause=lambda seconds: setattr(fake, "now", fake.now + seconds))
    backend.submit(dry_run_for({"name": "st", "roles": {"chief": {}, "worker": {"replicas": 2}},
                                "stall": {"timeout_seconds": FLOOR, "action": action},
                                "restart": {"max_restarts": 2}, **spec}))
    for job in ("st-chief", "st-worker"):
        fake.start_pods(job)
    return backend


def train(fake: FakeKubernetes, start: float, steps: int, every: float) -> float:
    """The chief builds its strategy at ``start`` and reports ``steps`` steps ``every`` s apart; the last one's time."""
    write(fake, "st-chief-0", Started(strategy="MultiWorkerMirroredStrategy", num_replicas_in_sync=3, time=start),
          *(Step(step=n, time=start + every * n) for n in range(1, steps + 1)))
    return start + every * steps


def test_a_job_whose_progress_stops_restarts_with_reason_stalled_and_uses_the_budget(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    last = train(fake, fake.now + 5, steps=10, every=2.0)  # timeout: the floor (10 x 2 s median is less)
    fake.now = last + FLOOR
    assert backend.supervision_round("st") == []
    assert backend.describe("st").stall.stalls == 0
    fake.on_sigterm.update({task: IGNORES_SIGTERM for task in TASKS})  # stuck: none can save
    stuck = [pod_of(fake, task) for task in TASKS]
    fake.now += 1
    actions = backend.supervision_round("st")
    assert actions[0].startswith("stall watchdog: stalled: no progress for 61 s (stall timeout 60 s)")
    assert "restarting st-chief-0, st-worker-0, st-worker-1 (restart 1/2)" in actions[0]
    assert actions[1:] == [f"stall restart: deleted {pod} (its Job recreates it)" for pod in stuck]
    status = backend.describe("st")
    assert status.state is State.RESTARTING
    assert (status.stall.stalls, status.stall.watching) == (1, True) and "stalled" in status.stall.message
    assert status.stall.evidence is StallEvidence.TIME_ONLY  # no pod's stacks could be read
    assert backend.supervision_round("st") == []  # acted once on this pod of the lead
    fake.now += 60  # the grace: killed (137), a failure the Job controller counts
    for job in ("st-chief", "st-worker"):
        fake.reconcile(job)
    status = backend.describe("st")
    assert status.state is State.RUNNING and status.restarts == 1
    assert [t.restarts for t in status.tasks] == [1, 1, 1]
    assert status.stall.stalls == 1 and "restart 1/2" in status.stall.message  # the last stall stays shown
    assert status.to_dict()["stall"]["stalls"] == 1  # status -o json
    fake.now += 3 * FLOOR  # the new attempt's first-step allowance: 3 x the floor, from the pod's start
    assert backend.supervision_round("st") == []


def test_jobs_without_an_event_token_are_never_judged(fake: FakeKubernetes) -> None:
    """Jobs an older tfcluster launched carry no token: none of their pods' lines can be read as a report, so their
    silence says nothing and the watch of this version leaves them alone."""
    spec = api.validate_data({"name": "st", "roles": {"chief": {}, "worker": {"replicas": 2}},
                              "stall": {"timeout_seconds": FLOOR, "action": "fail"}})
    backend = backend_for(fake)
    backend.submit(KubernetesBackend.dry_run(make_plan(spec, KubernetesBackend.target(spec), event_token="")))
    for job in ("st-chief", "st-worker"):
        fake.start_pods(job)
    write(fake, "st-chief-0", Step(step=1, time=fake.now + 5))  # the format of this version, with the token "manual"
    fake.now += 10 * FLOOR
    assert backend.supervision_round("st") == []
    status = backend.describe("st")
    assert status.stall is not None and not status.stall.watching and status.progress.step is None


def test_action_fail_ends_the_job_with_the_stall_as_its_reason(fake: FakeKubernetes) -> None:
    backend = launch(fake, action="fail")
    fake.now = train(fake, fake.now + 5, steps=3, every=2.0) + FLOOR + 1
    actions = backend.supervision_round("st")
    assert actions[0].startswith("stall watchdog: failed: stalled: no progress for")
    assert actions[1:] == ["stall: ended Job st-chief (its deadline is now)", "stall: ended Job st-worker (its deadline is now)"]
    for job in ("st-chief", "st-worker"):
        fake.reconcile(job)
    status = backend.describe("st")
    assert status.state is State.FAILED and status.restarts == 0
    assert status.message.startswith("failed: stalled: no progress for") and "DeadlineExceeded" in status.message
    assert {("batch", "jobs", "patch"), ("", "configmaps", "update")} <= rbac_used(fake) <= rbac_allowed()


def test_action_fail_ends_a_job_whose_status_changed_since_it_was_listed(fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real Job controller writes a running Job's status as its pods change, also between the watch's list and
    its ending of the Job (a replace then met 409 Conflict on .ci/k8s.sh's cluster): the deadline still lands."""
    backend = launch(fake, action="fail")
    fake.now = train(fake, fake.now + 5, steps=3, every=2.0) + FLOOR + 1
    listed = fake.list

    def list_then_status_write(plural: str, *args: Any, **kwargs: Any) -> Any:
        items = listed(plural, *args, **kwargs)
        if plural == "jobs":
            for item in items:
                fake.update("jobs", item["metadata"]["namespace"], item["metadata"]["name"],
                            lambda job: job["status"].setdefault("conditions", []))
        return items

    monkeypatch.setattr(fake, "list", list_then_status_write)
    actions = backend.supervision_round("st")
    assert actions[1:] == ["stall: ended Job st-chief (its deadline is now)", "stall: ended Job st-worker (its deadline is now)"]
    monkeypatch.undo()
    for job in ("st-chief", "st-worker"):
        fake.reconcile(job)
    assert backend.describe("st").state is State.FAILED


def test_a_stall_with_the_budget_used_up_fails_the_job(fake: FakeKubernetes) -> None:
    backend = launch(fake, restart={"max_restarts": 0})
    fake.now = train(fake, fake.now + 5, steps=3, every=2.0) + FLOOR + 1
    actions = backend.supervision_round("st")
    assert actions[0].startswith("stall watchdog: failed: stalled and the restart budget (0) is used up: no progress")
    assert len(actions) == 3 and not [d for d in fake.deletions if d[0] == "pods"]


def test_action_warn_only_says_so_once(fake: FakeKubernetes) -> None:
    backend = launch(fake, action="warn")
    fake.now = train(fake, fake.now + 5, steps=3, every=2.0) + FLOOR + 1
    actions = backend.supervision_round("st")
    assert len(actions) == 1 and actions[0].startswith("stall watchdog: stalled (warn only): no progress")
    fake.now += 600
    assert backend.supervision_round("st") == []
    status = backend.describe("st")
    assert status.state is State.RUNNING and status.restarts == 0 and not fake.deletions
    assert status.stall.stalls == 1 and status.stall.message.startswith("stalled (warn only)")


def test_a_healthy_job_with_a_slow_first_step_and_a_slow_epoch_end_is_not_stalled(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    start = fake.now + 5
    write(fake, "st-chief-0", Started(strategy="MultiWorkerMirroredStrategy", num_replicas_in_sync=3, time=start))
    fake.now = start + 3 * FLOOR - 1  # tracing the first step: up to 3 x the floor
    assert backend.supervision_round("st") == []
    first = fake.now
    write(fake, "st-chief-0", *(Step(step=n, time=first + 2.0 * n) for n in range(1, 11)))
    write(fake, "st-chief-0", EpochEnd(epoch=0, step=10, time=first + 20 + FLOOR - 1))  # a long save at the epoch's end
    fake.now = first + 20 + FLOOR - 1
    assert backend.supervision_round("st") == []
    fake.now += 3 * (FLOOR - 1)  # its longest interval, tripled, covers the next epoch's end
    assert backend.supervision_round("st") == []
    status = backend.describe("st")
    assert status.state is State.RUNNING and (status.stall.watching, status.stall.stalls) == (True, 0)
    assert not fake.deletions


def test_a_lead_whose_last_lines_hold_no_report_is_not_judged(fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its reports are further back than the lines the watch reads: it cannot tell when the last one came."""
    monkeypatch.setattr(k8s_runtime, "STALL_TAIL_LINES", 20)
    backend = launch(fake)
    last = train(fake, fake.now + 5, steps=3, every=2.0)
    key = ("default", pod_of(fake, "st-chief-0"))
    fake.pod_logs[key] += "a warning of the program\n" * 20
    fake.now = last + 10 * FLOOR
    assert backend.supervision_round("st") == []
    fake.pod_logs[key] += format_event(Step(step=4, time=fake.now - FLOOR - 1), "st-chief-0", MANUAL_TOKEN) + "\n"
    assert backend.supervision_round("st")[0].startswith("stall watchdog: stalled: no progress for 61 s")


def test_a_program_without_progress_reports_is_never_judged(fake: FakeKubernetes) -> None:
    backend = launch(fake, command=["python", "train.py"])
    fake.now += 24 * 3600
    assert backend.supervision_round("st") == []
    assert backend.describe("st").stall.watching is False


def test_a_straggler_is_named_in_describe_with_its_numbers(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    at = fake.now + 10
    for task, input_seconds in zip(TASKS, (0.1, 0.1, 0.4), strict=True):
        write(fake, task, *(StepTime(epoch=epoch, seconds_per_step=0.5, input_seconds_per_batch=input_seconds, time=at + epoch)
                            for epoch in range(3)))
    [straggler] = backend.describe("st").stragglers
    assert (straggler.task, straggler.measure, straggler.seconds, straggler.median_seconds, straggler.ratio) == \
        ("st-worker-1", "input_seconds_per_batch", 0.4, 0.1, 4.0)
    assert [s["task"] for s in backend.describe("st").to_dict()["stragglers"]] == ["st-worker-1"]  # status -o json
    [task] = [t for t in backend.describe("st").tasks if t.name == "st-worker-1"]
    assert task.step_time is not None and task.step_time.input_seconds_per_batch == 0.4  # its last report


def test_detached_without_a_deadline_warns_when_the_watch_has_a_stall_to_watch() -> None:
    pss = {"name": "p", "roles": {"chief": {}, "worker": {"replicas": 2}, "ps": {"replicas": 1}}}
    assert not dry_run_for(pss).supervised_only_while_watched  # its supervisor runs in the cluster
    pss["kubernetes"] = {"supervisor": False}
    assert dry_run_for(pss).supervised_only_while_watched  # the entrypoint reports progress
    assert not dry_run_for({**pss, "deadline_seconds": 600}).supervised_only_while_watched
    assert not dry_run_for({**pss, "command": ["python", "train.py"]}).supervised_only_while_watched


#: What ``py-spy dump`` prints of a task, as in the worker image: the built-in entrypoint waiting in a collective,
#: and worker 1's input pipeline stuck in Python inside a ``tf.py_function``.
WAITING = """Process 7: python -m launcher.worker
Python v3.11.2 (/opt/venv/bin/python)

Thread 7 (idle): "MainThread"
    _call_flat (/opt/venv/lib/python3.11/site-packages/tensorflow/python/eager/polymorphic_function/concrete_function.py:1324)
    train (/opt/venv/lib/python3.11/site-packages/launcher/worker/train.py:64)
"""
STUCK = WAITING + """Thread 41 (idle): "Thread-2"
    gate (/workspace/stuck_input.py:46)
    __call__ (/opt/venv/lib/python3.11/site-packages/tensorflow/python/ops/script_ops.py:268)
"""


def image(dump: str) -> Any:
    """A task container of the worker image under ``pods/exec``: ``ls /proc``, and py-spy through timeout."""
    def run(command: list[str]) -> tuple[int, str, str]:
        assert command[:2] == ["env", "RUST_BACKTRACE=0"], command
        if command[2:] == ["ls", "/proc"]:
            return 0, "1\n7\nself\n", ""
        assert command[2:6] == ["timeout", "-s", "KILL", "10"] and command[6:9] == ["py-spy", "dump", "--pid"], command
        if command[9] == "1":
            return 1, "", "Error: Failed to find python version from target process\n"
        return 0, dump, ""
    return run


def test_a_stall_reads_every_pods_stacks_through_exec_and_names_the_stuck_task(fake: FakeKubernetes) -> None:
    backend = launch(fake)
    fake.pod_exec.update({"st-chief-0": image(WAITING), "st-worker-0": image(WAITING), "st-worker-1": image(STUCK)})
    fake.now = train(fake, fake.now + 5, steps=10, every=2.0) + FLOOR + 1
    actions = backend.supervision_round("st")
    assert "suspected: st-worker-1 (a thread runs Python inside a TensorFlow op" in actions[0], actions[0]
    stall = backend.describe("st").stall
    assert stall.evidence is StallEvidence.STACKS_UNCHANGED and "stacks unchanged 5 s apart" in stall.message
    assert stall.suspects == ["st-worker-1"] and stall.stacks_dir is not None, stall
    stacks = Path(stall.stacks_dir)
    assert sorted(p.name for p in stacks.iterdir()) == [f"{task}.txt" for task in TASKS]
    assert "gate (/workspace/stuck_input.py:46)" in (stacks / "st-worker-1.txt").read_text()
    assert ("", "pods/exec", "get") in rbac_used(fake) <= rbac_allowed()
    backend.cancel("st", volumes=True)
    assert not stacks.exists()  # down removes what the watch kept on this machine


def test_debug_reads_the_stacks_of_every_running_pod_and_says_why_not_in_one_line(
        fake: FakeKubernetes, caplog: pytest.LogCaptureFixture) -> None:
    backend = launch(fake)
    fake.pod_exec.update({"st-chief-0": image(WAITING), "st-worker-1": image(STUCK)})  # worker 0: no py-spy
    fake.pod_exec["st-worker-0"] = lambda command: (127, "", "timeout: failed to run command 'py-spy': No such file\n") \
        if "py-spy" in command else (0, "1\n", "")
    dumps = backend.stacks("st")
    assert dumps["st-chief-0"] == WAITING.rstrip() and dumps["st-worker-0"] is None and "script_ops" in (dumps["st-worker-1"] or "")
    assert "no stacks of st-worker-0: py-spy is not in the task's image" in caplog.text  # the CLI shows it on stderr


def test_a_silent_job_whose_stacks_move_is_not_stalled_and_status_says_why(fake: FakeKubernetes) -> None:
    """A long evaluation on the chief: far past the floor without a report, its frames change between samples."""
    backend = launch(fake)
    samples = iter(range(1000))

    def evaluating(command: list[str]) -> tuple[int, str, str]:
        return image(WAITING.replace("train.py:64", f"train.py:{next(samples)}"))(command)

    fake.pod_exec.update({"st-chief-0": evaluating, "st-worker-0": image(WAITING), "st-worker-1": image(WAITING)})
    fake.now = train(fake, fake.now + 5, steps=10, every=2.0) + 3 * FLOOR
    assert backend.supervision_round("st") == []
    stall = backend.describe("st").stall
    assert (stall.stalls, stall.evidence) == (0, StallEvidence.STACKS_MOVED), stall
    assert "stacks moved, not a stall (the stacks of st-chief-0 moved" in stall.last_check
    fake.now += 10 * FLOOR
    assert backend.supervision_round("st") == [] and not fake.deletions


def in_cluster_rounds(fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch, said: list[str]) -> Any:
    """The in-cluster supervisor's rounds of ``st`` (``KubernetesBackend.rounds``), on the fake's clock; its pause
    between a suspected stall's two stack samples moves the fake's clock."""
    monkeypatch.setenv("TFCLUSTER_NAMESPACE", "default")
    monkeypatch.setenv("TFCLUSTER_POD", "st-supervisor-x7k2p")
    monkeypatch.setattr(k8s_backend, "connect", lambda context: client.ApiClient(client.Configuration(host=fake.url)))
    monkeypatch.setitem(KubernetesBackend.__init__.__kwdefaults__, "clock", lambda: fake.now)
    return KubernetesBackend.rounds("st", lambda seconds: setattr(fake, "now", fake.now + seconds), said.append)


def test_the_in_cluster_supervisor_keeps_a_stalls_stacks_in_the_runs_config_map_as_its_role_allows(
        fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    """They outlive its pod: ``status`` names where, kubectl reads them, ``down`` deletes them with the run."""
    launcher = launch(fake)
    fake.pod_exec.update({"st-chief-0": image(WAITING), "st-worker-0": image(WAITING), "st-worker-1": image(STUCK)})
    fake.now = train(fake, fake.now + 5, steps=10, every=2.0) + FLOOR + 1
    rules = supervisor_objects.rules(plan_for({"name": "st", "roles": {"chief": {}, "worker": {"replicas": 2}}}))
    fake.allowed = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    fake.requests[:] = []
    said: list[str] = []
    actions = in_cluster_rounds(fake, monkeypatch, said).round()
    assert "suspected: st-worker-1" in actions[0] and actions[1:] == [
        f"stall restart: deleted {pod_of(fake, task)} (its Job recreates it)" for task in TASKS]
    assert any(line.startswith("stacks of st-worker-1 at stall 1:") for line in said)  # and in its log
    kept = fake.get("configmaps", "st-tfconfig")["data"][in_cluster.STACKS_KEY]
    assert [line for line in kept.splitlines() if line.startswith("==")] == [f"== {task} (stall 1)" for task in TASKS]
    assert "gate (/workspace/stuck_input.py:46)" in kept.split("== st-worker-1")[1]
    where = launcher.describe("st").stall.stacks_dir or ""
    assert where.startswith("ConfigMap st-tfconfig key stacks (kubectl get configmap st-tfconfig -n default -o jsonpath='{.data.stacks}'")
    assert "kubectl logs st-supervisor-x7k2p" in where
    named = {(r, v): set(rule["resourceNames"]) for rule in rules if "resourceNames" in rule
             for r in rule["resources"] for v in rule["verbs"]}
    assert ("", "configmaps", "update") in rbac_used(fake) <= fake.allowed
    for method, path in fake.requests:
        group, resource, verb = permission(method, path)
        if (resource, verb) in named:
            assert path.split("?")[0].rstrip("/").split("/")[-1] in named[resource, verb], (method, path)
    fake.allowed = None  # the launcher's `down`
    launcher.cancel("st")
    assert ("configmaps", "default", "st-tfconfig") not in fake.objects


def test_the_stacks_kept_in_the_config_map_are_bounded_and_say_what_was_cut(
        fake: FakeKubernetes, monkeypatch: pytest.MonkeyPatch) -> None:
    launch(fake)
    huge = WAITING + "".join(f"    frame{n} (/workspace/deep.py:{n})\n" for n in range(40_000))
    fake.pod_exec.update({"st-chief-0": image(huge), "st-worker-0": image(WAITING), "st-worker-1": image(STUCK + "x" * 10)})
    fake.now = train(fake, fake.now + 5, steps=10, every=2.0) + FLOOR + 1
    in_cluster_rounds(fake, monkeypatch, []).round()
    data = fake.get("configmaps", "st-tfconfig")["data"]
    kept = data[in_cluster.STACKS_KEY]
    assert len(kept.encode()) <= in_cluster.STACKS_BYTES < len(huge)
    assert sum(len(k.encode()) + len(v.encode()) for k, v in data.items()) <= CONFIG_MAP_LIMIT
    chief = kept.split("== st-worker-0")[0]
    assert chief.startswith("== st-chief-0 (stall 1)\n" + WAITING) and chief.endswith(" bytes, the first kept\n")
    assert "gate (/workspace/stuck_input.py:46)" in kept.split("== st-worker-1")[1]  # a short dump is kept whole


def test_bounded_text_keeps_each_tasks_share_within_the_limit() -> None:
    dumps = {"a": "x" * 1000, "b": None, "c": "short\n"}
    for limit in (0, 10, 60, 200, 5000):
        text = bounded_text(3, dumps, limit)
        assert len(text.encode()) <= limit
    assert bounded_text(3, dumps, 5000) == "== a (stall 3)\n" + "x" * 1000 + "\n== b (stall 3)\n" + NO_STACKS + "\n== c (stall 3)\nshort\n"
    assert "... cut: 1001 bytes, the first kept" in bounded_text(3, dumps, 600)
