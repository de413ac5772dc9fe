"""Kubeflow TFJob manifests read as they are: dry-run, convert, and problems named by the TFJob's own fields."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.k8s_specs import manifests as k8s_manifests
from helpers.paths import REPO
from helpers.required import require_module
from launcher import api
from launcher.backends.compose.render import COMPOSE_FILE
from launcher.backends.compose.render import render as compose_render
from launcher.backends.kubernetes.manifests import render_tfjob
from launcher.cli.commands import main
from launcher.plan.script import ScriptRun
from launcher.spec.models import RestartPolicy, RoleType, Strategy

TFJOB = REPO / "examples" / "tfjob.yaml"
CLI = [sys.executable, "-m", "launcher"]


def _tfjob(**replica_changes) -> dict:
    data = yaml.safe_load(TFJOB.read_text())
    for replica, change in replica_changes.items():
        change(data["spec"]["tfReplicaSpecs"][replica])
    return data


def _errors(tmp_path: Path, data: dict, *args: str) -> list[str]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = subprocess.run([*CLI, *args, str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    return result.stderr.splitlines()


@pytest.mark.tf  # imports TensorFlow
def test_a_tfjob_with_chief_ps_and_two_workers_dry_runs_to_four_tasks_tensorflow_accepts(cli, monkeypatch) -> None:
    tf_resolver = require_module("tensorflow.python.distribute.cluster_resolver.tfconfig_cluster_resolver")
    for backend in ("local", "k8s"):
        result = cli.invoke(main, ["dry-run", str(TFJOB), "-b", backend, "-o", "json"])
        assert result.exit_code == 0, result.output
        tasks = json.loads(result.stdout)["tasks"]
        assert [(t["type"], t["index"]) for t in tasks] == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]
        for task in tasks:
            monkeypatch.setenv("TF_CONFIG", json.dumps(task["tf_config"]))
            resolver = tf_resolver.TFConfigClusterResolver()
            assert (resolver.task_type, resolver.task_id) == (task["type"], task["index"])
            assert resolver.cluster_spec().task_address(task["type"], task["index"]) == task["address"]


def test_the_tfjob_fields_are_carried() -> None:
    spec = api.load_spec(TFJOB, "k8s")
    assert spec.name == "mnist-pss" and spec.kubernetes.namespace == "ml"
    assert api.plan(spec, "k8s").strategy is Strategy.PARAMETER_SERVER
    chief, worker = spec.roles.role(RoleType.CHIEF), spec.roles.role(RoleType.WORKER)
    assert chief.image == worker.image == "registry.example.com/mnist:1.0"
    assert chief.command == ["python", "/app/train.py", "--epochs", "3"] and chief.env == {"LOG_LEVEL": "info"}
    assert (chief.resources.cpu, chief.resources.memory) == (0.5, "2Gi")
    assert (worker.replicas, worker.resources.cpu, worker.resources.memory, worker.resources.gpu) == (2, 2.0, "4Gi", 1)
    assert (spec.restart.policy, spec.restart.max_restarts, spec.deadline_seconds) == (RestartPolicy.ON_FAILURE, 4, 3600)
    assert spec.kubernetes.ttl_seconds_after_finished == 600


def test_convert_prints_an_equivalent_spec_with_its_image_and_command(cli, tmp_path: Path) -> None:
    result = cli.invoke(main, ["convert", str(TFJOB)])
    assert result.exit_code == 0, result.output
    converted = tmp_path / "converted.yaml"
    converted.write_text(result.stdout)
    assert api.load_spec(converted, "k8s") == api.load_spec(TFJOB, "k8s")
    worker = yaml.safe_load(result.stdout)["roles"]["worker"]
    assert worker["image"] == "registry.example.com/mnist:1.0"
    assert worker["command"] == ["python", "/app/train.py", "--epochs", "3"]


def _with_storage_and_identity(replica: dict) -> None:
    pod = replica["template"]["spec"]
    pod["serviceAccountName"] = "trainer"
    pod["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}},
                      {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data", "readOnly": True},
                                            {"name": "cache", "mountPath": "/cache", "subPath": "tf"}]


def test_convert_comments_every_field_it_does_not_carry(cli, tmp_path: Path) -> None:
    def extras(replica: dict) -> None:
        pod = replica["template"]["spec"]
        pod["hostNetwork"] = True
        pod["containers"][0]["livenessProbe"] = {"exec": {"command": ["true"]}}

    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(_tfjob(Worker=extras)))
    result = cli.invoke(main, ["convert", str(path)])
    comments = [line for line in result.stdout.splitlines() if line.startswith("# not carried")]
    assert comments == [
        "# not carried: spec.tfReplicaSpecs.Worker.template.spec.hostNetwork: tfcluster does not carry this pod "
        "field yet",
        "# not carried: spec.tfReplicaSpecs.Worker.template.spec.containers.0.livenessProbe: "
        "tfcluster does not carry this container field"]


def test_the_tfjobs_annotations_and_a_pull_policy_tfcluster_would_not_honour_are_refused(cli, tmp_path: Path) -> None:
    def own(replica: dict) -> None:
        replica["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Always"  # the tag is 1.0: not the default

    data = _tfjob(Chief=own, Worker=own, PS=own)
    data["metadata"].update(annotations={"note": "x"}, uid="123")
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    out = cli.invoke(main, ["convert", str(path)]).stdout
    assert "# not carried: metadata.annotations: tfcluster has no annotations for its objects" in out
    assert ("# not carried: spec.tfReplicaSpecs.Worker.template.spec.containers.0.imagePullPolicy: tfcluster's pods "
            "get IfNotPresent for this image") in out
    assert "# not carried: metadata.uid: set by the Kubernetes API server, not by a manifest" in out
    errors = _errors(tmp_path, data, "validate", "-b", "k8s")
    assert len(errors) == 2 + 3, errors  # the TFJob's annotations and uid; each replica's pull policy


def test_labels_go_on_the_objects_and_pod_labels_on_the_pods_on_kubernetes_and_warn_elsewhere(tmp_path: Path) -> None:
    def own(replica: dict) -> None:
        replica["template"]["metadata"] = {"labels": {"app": "mnist", "team": "vision"}}

    data = _tfjob(Chief=own, Worker=own, PS=own)
    data["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q", "app.kubernetes.io/part-of": "mnist"}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = api.load_spec(path, "k8s")
    assert spec.kubernetes.labels == data["metadata"]["labels"]
    assert spec.kubernetes.pod_labels == {"app": "mnist", "team": "vision"}
    for obj in k8s_manifests(api.plan(spec, "k8s", run_id="r1")):
        assert data["metadata"]["labels"].items() <= obj["metadata"]["labels"].items(), obj["metadata"]
        if obj["kind"] == "Job" and not obj["metadata"]["name"].endswith("-supervisor"):  # the tasks' Jobs
            pod_labels = obj["spec"]["template"]["metadata"]["labels"]
            assert pod_labels["app"] == "mnist" and pod_labels["tfcluster.io/cluster"] == "mnist-pss"
    tfjob = next(o for o in yaml.safe_load_all(render_tfjob(api.plan(spec, "k8s"))["tfjob.yaml"]) if o)
    assert tfjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    local = subprocess.run([*CLI, "validate", "-b", "local", str(path)], capture_output=True, text=True, timeout=60)
    assert local.returncode == 0, local.stderr  # labels change nothing off Kubernetes: a warning each, not a refusal
    assert [e.split(": ", 2)[2] for e in local.stderr.splitlines()] == [
        "metadata.labels: no effect off Kubernetes (-b k8s carries it)",
        "spec.tfReplicaSpecs.Chief.template.metadata.labels: no effect off Kubernetes (-b k8s carries it)"], local.stderr


def test_labels_the_job_controller_sets_are_refused_at_the_tfjobs_line_and_tfclusters_own_dropped(tmp_path: Path) -> None:
    def own(replica: dict) -> None:
        replica["template"]["metadata"] = {"labels": {"job-name": "x"}}

    data = _tfjob(Chief=own, Worker=own, PS=own)
    data["metadata"]["labels"] = {"tfcluster.io/cluster": "other", "Bad Key": "v"}
    errors = _errors(tmp_path, data, "validate", "-b", "k8s")
    assert sorted(e.split(": ", 1)[1] for e in errors) == sorted([
        'metadata.labels."Bad Key": is not a Kubernetes label key: an optional DNS subdomain and \'/\', then at most 63 '
        "letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        "spec.tfReplicaSpecs.Chief.template.metadata.labels.job-name: is set by tfcluster or by Kubernetes' Job "
        "controller"]), errors


def test_pod_annotations_tfjob_port_and_a_default_pull_policy_are_carried_other_ports_noted(
        cli, tmp_path: Path) -> None:
    def own(replica: dict) -> None:
        replica["template"]["metadata"] = {"annotations": {"sidecar.istio.io/inject": "false"}}
        container = replica["template"]["spec"]["containers"][0]
        container["ports"] = [{"name": "tfjob-port", "containerPort": 8888}, {"name": "metrics", "containerPort": 9090}]
        container["imagePullPolicy"] = "IfNotPresent"

    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(_tfjob(Chief=own, Worker=own, PS=own)))
    spec = api.load_spec(path, "k8s")
    assert spec.kubernetes.pod_annotations == {"sidecar.istio.io/inject": "false"}
    assert {spec.roles.role(role).port for role in (RoleType.CHIEF, RoleType.WORKER, RoleType.PS)} == {8888}
    notes = [line for line in cli.invoke(main, ["convert", str(path)]).stdout.splitlines() if line.startswith("# note")]
    assert ("# note: spec.tfReplicaSpecs.Worker.template.spec.containers.0.ports.1: ignored: a declaration only, "
            "Kubernetes opens or closes no port by it") in notes
    assert not [note for note in notes if "imagePullPolicy" in note]  # the policy tfcluster renders: carried as it is
    assert len(notes) == 3


def test_a_host_port_is_refused(tmp_path: Path) -> None:
    def host_port(replica: dict) -> None:
        replica["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 2222, "hostPort": 2222}]

    errors = _errors(tmp_path, _tfjob(Worker=host_port), "validate")
    assert [e.split(": ", 1)[1] for e in errors] == [
        "spec.tfReplicaSpecs.Worker.template.spec.containers.0.ports.0.hostPort: not carried: tfcluster does not "
        "bind ports on the node"]


def test_resources_take_limits_else_requests_and_convert_notes_what_becomes_a_limit(cli, tmp_path: Path) -> None:
    def requests(replica: dict) -> None:
        replica["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}

    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(_tfjob(Worker=requests)))
    worker = api.load_spec(path, "compose").roles.role(RoleType.WORKER)
    assert (worker.resources.cpu, worker.resources.memory) == (1.0, "2Gi")
    out = cli.invoke(main, ["convert", str(path)]).stdout
    at = "spec.tfReplicaSpecs.Worker.template.spec.containers.0.resources"
    assert (f"# note: {at}.requests.cpu: a request only: tfcluster renders requests = limits, so it is a limit too"
            in out)
    assert f"# note: {at}.requests.memory: raised to the limit: tfcluster renders requests = limits" in out


def test_volumes_mounts_and_service_account_are_carried_to_kubernetes(cli, tmp_path: Path) -> None:
    data = _tfjob(Chief=_with_storage_and_identity, PS=_with_storage_and_identity, Worker=_with_storage_and_identity)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    k8s = api.load_spec(path, "k8s").kubernetes
    assert k8s.service_account == "trainer"
    assert [(v.name, v.source) for v in k8s.volumes] == [
        ("data", {"persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}}),
        ("cache", {"emptyDir": {"sizeLimit": "1Gi"}})]
    assert [(m.name, m.mount_path, m.read_only, m.sub_path) for m in k8s.volume_mounts] == [
        ("data", "/data", True, None), ("cache", "/cache", False, "tf")]
    result = cli.invoke(main, ["convert", str(path)])
    assert result.exit_code == 0, result.output
    assert "# not carried" not in result.stdout
    assert "# Kubernetes only (-b k8s): spec.tfReplicaSpecs.Chief.template.spec.containers.0.volumeMounts" in result.stdout
    converted = tmp_path / "converted.yaml"
    converted.write_text(result.stdout)
    assert api.load_spec(converted, "k8s") == api.load_spec(path, "k8s")
    for backend in ("local", "compose"):
        errors = _errors(tmp_path, data, "dry-run", "-b", backend)
        assert sorted(e.split(": ", 1)[1] for e in errors) == [
            f"spec.tfReplicaSpecs.Chief.template.spec.{field}: only the Kubernetes backend carries it (-b k8s)"
            for field in ("containers.0.volumeMounts", "serviceAccountName", "volumes")]


def test_pod_fields_that_differ_between_replicas_are_reported(tmp_path: Path) -> None:
    def other_mount(replica: dict) -> None:
        _with_storage_and_identity(replica)
        replica["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = "/elsewhere"

    data = _tfjob(Chief=_with_storage_and_identity, Worker=other_mount)
    [error] = _errors(tmp_path, data, "validate")
    assert error.endswith("spec.tfReplicaSpecs.Worker.template.spec.containers.0.volumeMounts: not carried: differs "
                          "from spec.tfReplicaSpecs.Chief.template.spec.containers.0.volumeMounts; tfcluster sets it "
                          "for every role")


def test_a_mount_field_tfcluster_lacks_is_named_by_its_tfjob_path(tmp_path: Path) -> None:
    def propagating(replica: dict) -> None:
        _with_storage_and_identity(replica)
        replica["template"]["spec"]["containers"][0]["volumeMounts"][1]["mountPropagation"] = "HostToContainer"

    [error] = _errors(tmp_path, _tfjob(Chief=propagating), "validate")
    assert "spec.tfReplicaSpecs.Chief.template.spec.containers.0.volumeMounts.1.mountPropagation:" in error


def test_problems_name_the_tfjob_file_line_and_field(tmp_path: Path) -> None:
    def bad_worker(replica: dict) -> None:
        replica["replicas"] = -1
        replica["template"]["spec"]["hostNetwork"] = True

    data = _tfjob(Worker=bad_worker)
    data["spec"]["tfReplicaSpecs"]["Launcher"] = {"replicas": 1}
    errors = _errors(tmp_path, data, "validate")
    path = tmp_path / "job.yaml"
    lines = path.read_text().splitlines()
    assert len(errors) == 3  # what is not carried, and what is carried but wrong: every problem at once
    assert errors[0].startswith(f"{path}:") and errors[0].endswith(
        "spec.tfReplicaSpecs.Worker.template.spec.hostNetwork: not carried: tfcluster does not carry this pod "
        "field yet")
    assert "spec.tfReplicaSpecs.Launcher: unknown replica type" in errors[1]
    assert "spec.tfReplicaSpecs.Worker.replicas: Input should be greater than or equal to 0" in errors[2]
    line = int(errors[1].split(":")[1])
    assert lines[line - 1].strip() == "Launcher:"
    del data["spec"]["tfReplicaSpecs"]["Launcher"]
    del data["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["hostNetwork"]
    [error] = _errors(tmp_path, data, "validate")
    line = int(error.split(":")[1])
    assert "spec.tfReplicaSpecs.Worker.replicas: Input should be greater than or equal to 0" in error
    assert path.read_text().splitlines()[line - 1].strip() == "replicas: -1"


def test_kubernetes_only_pod_fields_are_refused_on_local_and_compose_and_carried_on_k8s(tmp_path: Path) -> None:
    def scheduled(replica: dict) -> None:
        replica["template"]["spec"]["nodeSelector"] = {"pool": "gpu"}

    data = _tfjob(Worker=scheduled)
    for backend in ("local", "compose"):
        [error] = _errors(tmp_path, data, "dry-run", "-b", backend)
        assert error.endswith("spec.tfReplicaSpecs.Worker.template.spec.nodeSelector: only the Kubernetes backend "
                              "carries it (-b k8s)")
    spec = api.load_spec(tmp_path / "job.yaml", "k8s")
    assert spec.kubernetes.node_selector == {"pool": "gpu"}


def test_no_command_runs_the_image_own_command_in_containers_only(tmp_path: Path) -> None:
    def image_command(replica: dict) -> None:
        container = replica["template"]["spec"]["containers"][0]
        del container["command"], container["args"]

    data = _tfjob(Chief=image_command, PS=image_command, Worker=image_command)
    errors = _errors(tmp_path, data, "dry-run")
    assert any("spec.tfReplicaSpecs.Chief.template.spec.containers.0.command: is empty: the image's own command"
               in e for e in errors)
    dry_run = api.dry_run(api.load_spec(tmp_path / "job.yaml", "k8s"), "k8s")
    assert [t.command for t in dry_run.plan.tasks] == [[]] * 4
    manifests = {name: text for name, text in dry_run.files.items() if name != "supervisor.yaml"}  # the tasks'
    assert "args:" not in "".join(manifests.values())


def _containers(data: dict, tmp_path: Path) -> tuple[list[dict], list[dict]]:
    """The Kubernetes containers (a Job per task, then the TFJob export's replicas) and compose services the TFJob
    renders to."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    k8s = api.plan(api.load_spec(path, "k8s"), "k8s")
    pods = [o["spec"]["template"]["spec"] for o in k8s_manifests(k8s)
            if o["kind"] == "Job" and not o["metadata"]["name"].endswith("-supervisor")]  # the tasks', not tfcluster's
    exported = yaml.safe_load_all(render_tfjob(k8s)["tfjob.yaml"])
    pods += [r["template"]["spec"] for doc in exported if doc["kind"] == "TFJob"
             for r in doc["spec"]["tfReplicaSpecs"].values()]
    compose = yaml.safe_load(compose_render(api.plan(api.load_spec(path, "compose"), "compose"))[COMPOSE_FILE])
    return [pod["containers"][0] for pod in pods], list(compose["services"].values())


def test_a_tfjob_command_replaces_the_image_entrypoint_as_in_kubernetes(tmp_path: Path) -> None:
    containers, services = _containers(_tfjob(), tmp_path)
    program = ["python", "/app/train.py", "--epochs", "3"]
    assert len(containers) == 4 + 3 and all(c["command"] == program and "args" not in c for c in containers)
    assert len(services) == 4 and all(s["entrypoint"] == program and "command" not in s for s in services)
    assert api.convert_tfjob(TFJOB).count("replaces_entrypoint: true") == 3


def test_tfjob_args_alone_run_after_the_image_entrypoint(cli, tmp_path: Path) -> None:
    def args_only(replica: dict) -> None:
        del replica["template"]["spec"]["containers"][0]["command"]

    data = _tfjob(Chief=args_only, PS=args_only, Worker=args_only)
    containers, services = _containers(data, tmp_path)
    assert all(c["args"] == ["--epochs", "3"] and "command" not in c for c in containers)
    assert all(s["command"] == ["--epochs", "3"] and "entrypoint" not in s for s in services)
    plan = cli.invoke(main, ["dry-run", str(tmp_path / "job.yaml"), "-b", "k8s", "-o", "plan"]).stdout
    assert "replaces_entrypoint" not in plan


def test_dry_run_says_a_command_replaces_the_image_entrypoint(cli) -> None:
    text = cli.invoke(main, ["dry-run", str(TFJOB), "-b", "compose"]).stdout
    assert 'command (in place of the image\'s ENTRYPOINT): ["python", "/app/train.py", "--epochs", "3"]' in text
    local = cli.invoke(main, ["dry-run", str(TFJOB), "-b", "local"]).stdout
    assert "ENTRYPOINT" not in local


def test_replaces_entrypoint_needs_a_command_of_the_role(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "roles": {"worker": {"replicas": 1, "replaces_entrypoint": True}}}))
    result = subprocess.run([*CLI, "validate", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert ("roles.worker.replaces_entrypoint: needs a non-empty roles.worker.command to run in place of the "
            "image's ENTRYPOINT") in result.stderr


def test_run_f_takes_roles_and_resources_from_a_tfjob_and_runs_the_script(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec = api.script_spec(ScriptRun(program="train.py", args=("--fast",)), TFJOB, tmp_path)
    assert spec.name == "mnist-pss" and spec.roles.replicas(RoleType.WORKER) == 2
    assert spec.roles.role(RoleType.WORKER).resources.memory == "4Gi"
    plan = api.plan(spec, "local")
    chief = plan.task("mnist-pss-chief-0")
    assert chief.command == [sys.executable, "train.py", "--fast"]
    assert plan.task("mnist-pss-ps-0").command[1:] == ["-m", "launcher.worker"]  # PSS: tfcluster serves
    assert not any(task.replaces_entrypoint for task in plan.tasks)  # the script runs as a native spec's program


#: The issue's attack: text that, written raw into one of convert's comments, ends the comment and starts a
#: `slurm:` section whose setup lines every Slurm task would run.
INJECTION = '\nslurm:\n  setup: ["touch pwned"]\n#'


@pytest.mark.parametrize("line_break", ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029"], ids=ascii)
@pytest.mark.parametrize("where", ["label key", "file name", "both"])
def test_a_label_key_or_file_name_with_a_line_break_adds_no_line_to_the_converted_spec(
        cli, tmp_path: Path, where: str, line_break: str) -> None:
    injection = INJECTION.replace("\n", line_break)
    data = _tfjob()
    if where != "file name":  # one of tfcluster's own labels: dropped, and its key named in a note
        data["metadata"]["labels"] = {f"tfcluster.io/x{injection}": "v"}
    path = tmp_path / (f"job{injection}.yaml" if where != "label key" else "job.yaml")
    path.write_text(yaml.safe_dump(data))
    result = cli.invoke(main, ["convert", str(path)])
    assert result.exit_code == 0, result.output
    converted = yaml.safe_load(result.stdout)
    assert "slurm" not in converted and converted == yaml.safe_load(api.convert_tfjob(TFJOB))
    comments = [line for line in result.stdout.splitlines() if line.startswith("#")]
    assert len(comments) == 1 + (where != "file name"), comments  # the header line, the own label's note
    assert sum(ascii(injection)[1:-1] in line for line in comments) == 1 + (where == "both"), comments  # escaped


def test_a_node_selector_or_pod_annotation_key_the_api_server_would_refuse_is_refused_at_validate(tmp_path: Path) -> None:
    """Kubernetes checks a nodeSelector as labels and an annotation key as a label key in any case (a value may
    hold lines): refused at the TFJob's field before anything starts, not by the API server mid-launch."""
    def pod_fields(replica: dict) -> None:
        replica["template"]["spec"]["nodeSelector"] = {"pool\nx": "gpu", "zone": "a\nb"}
        replica["template"]["metadata"] = {"annotations": {"Example.COM/Ok": "two\nlines", "note\nslurm": "x"}}

    errors = _errors(tmp_path, _tfjob(Chief=pod_fields, Worker=pod_fields, PS=pod_fields), "validate", "-b", "k8s")
    where = "spec.tfReplicaSpecs.Chief.template"
    assert sorted(e.split(": ", 1)[1].split(": ", 1)[0] for e in errors) == [
        f'{where}.metadata.annotations."note\\nslurm"', f'{where}.spec.nodeSelector."pool\\nx"',
        f"{where}.spec.nodeSelector.zone"], errors


def test_every_problem_of_a_tfjob_is_reported_not_only_those_of_its_first_phase(tmp_path: Path) -> None:
    """A field tfcluster does not carry (refused while converting) and a bad value it carries (refused when the
    spec is validated): one line each, in one run, each at its TFJob field."""

    def broken(worker: dict) -> None:
        worker["replicas"] = -1
        worker["template"]["spec"]["hostNetwork"] = True
        worker["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": "lots"}}

    data = _tfjob(Worker=broken)
    data["metadata"]["name"] = "Bad"
    lines = _errors(tmp_path, data, "validate", "-b", "k8s")
    assert [line.split(": ", 2)[1] for line in lines] == [
        "spec.tfReplicaSpecs.Worker.template.spec.hostNetwork", "metadata.name", "spec.tfReplicaSpecs.Worker.replicas",
        "spec.tfReplicaSpecs.Worker.template.spec.containers.0.resources.limits.memory"], lines


def test_a_tfjob_without_replicas_is_one_line_not_two(tmp_path: Path) -> None:
    data = _tfjob()
    data["spec"]["tfReplicaSpecs"] = {}
    lines = _errors(tmp_path, data, "validate")
    assert [line.split(": ", 1)[1] for line in lines] == ["spec.tfReplicaSpecs: a TFJob needs at least one replica spec"]


def test_a_priority_class_is_carried_from_the_pods_or_the_scheduling_policy_and_exported_again(cli, tmp_path: Path
                                                                                               ) -> None:
    """The pods' ``priorityClassName`` and ``runPolicy.schedulingPolicy.priorityClass`` (the operator's PodGroup's,
    which its pods share) are ``kubernetes.priority_class``; its gang settings are no setting of tfcluster's; a class
    the pods and the policy disagree on is reported; ``render --format tfjob`` writes it on every replica's pods."""
    def high(replica: dict) -> None:
        replica["template"]["spec"]["priorityClassName"] = "team-high"

    data = _tfjob(Chief=high, Worker=high, PS=high)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = api.load_spec(path, "k8s")
    assert spec.kubernetes.priority_class == "team-high"
    exported = yaml.safe_load(render_tfjob(api.plan(spec, "k8s"))["tfjob.yaml"].split("\n", 1)[1])
    assert {r["template"]["spec"]["priorityClassName"] for r in exported["spec"]["tfReplicaSpecs"].values()} == {
        "team-high"}
    result = cli.invoke(main, ["convert", str(path)])
    assert result.exit_code == 0 and yaml.safe_load(result.stdout)["kubernetes"]["priority_class"] == "team-high"

    by_policy = _tfjob()
    by_policy["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "team-low", "minAvailable": 3}
    path.write_text(yaml.safe_dump(by_policy, sort_keys=False))
    out = cli.invoke(main, ["convert", str(path)]).stdout
    assert yaml.safe_load(out)["kubernetes"]["priority_class"] == "team-low"
    assert "# not carried: spec.runPolicy.schedulingPolicy.minAvailable: tfcluster has no such setting" in out

    data["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "team-low"}
    [error] = _errors(tmp_path, data, "validate", "-b", "k8s")
    assert error.endswith("spec.runPolicy.schedulingPolicy.priorityClass: not carried: differs from "
                          "spec.tfReplicaSpecs.Chief.template.spec.priorityClassName; tfcluster sets it for every role")
    by_policy["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": "Team_High"}
    [error] = _errors(tmp_path, by_policy, "validate", "-b", "k8s")
    assert "spec.runPolicy.schedulingPolicy.priorityClass: " in error and "DNS-1123 subdomain" in error, error
