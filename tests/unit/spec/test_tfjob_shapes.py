"""Any shape of TFJob file is one line per problem and exit 2 from every command that reads one; Kubeflow's own
example shapes are taken as they are, a field honoured differently but safely being one warning line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli.commands import main

HEAD = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: j}\nspec:\n"


def _worker(container: str, extra: str = "") -> str:
    """A TFJob of two workers whose container has ``container``'s fields (and a command, unless they give one:
    a TFJob without one is a problem of its own on the local backend, reported with the others)."""
    program = "" if "command:" in container or "args:" in container else "command: [python, train.py], "
    return HEAD + f"  tfReplicaSpecs:\n    Worker:\n      replicas: 2\n{extra}" \
                  f"      template: {{spec: {{containers: [{{name: tensorflow, image: img, {program}{container}}}]}}}}\n"


#: (file text, the problem lines expected, each as its field and the start of its message)
MALFORMED = [
    (_worker('command: "python train.py"'),
     ["spec.tfReplicaSpecs.Worker.template.spec.containers.0.command: must be a list of strings"]),
    (_worker("args: {a: 1}"), ["spec.tfReplicaSpecs.Worker.template.spec.containers.0.args: must be a list"]),
    (_worker("command: [python, 3, [x]]"),
     ["containers.0.command.1: must be a string, not a number", "containers.0.command.2: must be a string, not a list"]),
    (_worker('env: "A=1"'), ["containers.0.env: must be a list, not a string"]),
    (_worker("env: [{name: [1], value: x}, 3, {name: A, value: {b: 1}}]"),
     ["containers.0.env.0: an env entry is a mapping with a string name",
      "containers.0.env.1: an env entry is a mapping with a string name",
      "containers.0.env.2.value: must be a string, not a mapping"]),
    (_worker("resources: {limits: [1]}, ports: [7]"),
     ["containers.0.resources.limits: must be a mapping, not a list", "containers.0.ports.0: must be a mapping"]),
    (HEAD + "  tfReplicaSpecs:\n    Chief: {template: {spec: {containers: [{name: tensorflow, image: img, command: [x]}]}}}\n"
            "    Master: {template: {spec: {containers: [{name: tensorflow, image: img, command: [x]}]}}}\n",
     ["spec.tfReplicaSpecs.Master: a second chief: Chief and Master name the same replica type"]),
    (HEAD + "  tfReplicaSpecs: [Worker]\n", ["spec.tfReplicaSpecs: must be a mapping, not a list"]),
    (HEAD + "  runPolicy: [1]\n  tfReplicaSpecs: {Worker: {template: {spec: {containers: [{image: img, command: [x]}]}}}}\n",
     ["spec.runPolicy: must be a mapping, not a list"]),
    (_worker("command: [python]").replace("metadata: {name: j}", "metadata: [j]"),
     ["metadata: must be a mapping, not a list"]),
]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def _commands(path: Path) -> list[list[str]]:
    return [["validate", str(path)], ["convert", str(path)], ["dry-run", str(path), "-b", "compose"],
            ["up", str(path)], ["run", "-f", str(path), "train.py"]]


@pytest.mark.parametrize(("text", "expected"), MALFORMED)
def test_a_malformed_tfjob_is_one_line_per_problem_and_exit_2_from_every_command(
        cli: CliRunner, tmp_path: Path, monkeypatch, text: str, expected: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("raise SystemExit('never runs')\n")
    path = _write(tmp_path, text)
    for command in _commands(path):
        result = cli.invoke(main, command)
        assert result.exit_code == 2, (command, result.output)
        assert result.stdout == "" and "Traceback" not in result.stderr, (command, result.output)
        lines = result.stderr.splitlines()
        assert len(lines) == len(expected), (command, lines)
        for line, want in zip(lines, expected, strict=True):
            assert line.startswith(f"{path}:") and want in line, (command, line)


def test_a_command_given_as_one_string_is_not_split_into_characters(cli: CliRunner, tmp_path: Path) -> None:
    path = _write(tmp_path, _worker('command: "python train.py"'))
    result = cli.invoke(main, ["convert", str(path)])
    assert result.exit_code == 2 and "- p\n" not in result.output


def test_nulls_are_unset_as_in_kubernetes(cli: CliRunner, tmp_path: Path) -> None:
    path = _write(tmp_path, _worker("command: [python, t.py], args: null, env: null, resources: null",
                                    extra="      restartPolicy: null\n").replace("replicas: 2", "replicas: null"))
    result = cli.invoke(main, ["convert", str(path)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["roles"]["worker"] == {
        "replicas": 1, "image": "img", "command": ["python", "t.py"], "replaces_entrypoint": True}


def test_keys_that_are_not_strings_are_named_not_sorted_into_a_traceback(cli: CliRunner, tmp_path: Path) -> None:
    text = _worker("command: [python], 1: x, 2.5: y").replace("metadata: {name: j}", "metadata: {name: j, 7: a}")
    path = _write(tmp_path, text)
    result = cli.invoke(main, ["validate", str(path), "-b", "k8s"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [line.split(": ")[1] for line in result.stderr.splitlines()] == [
        "metadata.7", "spec.tfReplicaSpecs.Worker.template.spec.containers.0.1",
        "spec.tfReplicaSpecs.Worker.template.spec.containers.0.\"2.5\""]


#: The shape of Kubeflow's MultiWorkerMirrored example (examples/tensorflow/distribution_strategy/keras-API).
KUBEFLOW_MULTI_WORKER = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: multi-worker
spec:
  runPolicy:
    cleanPodPolicy: None
  tfReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: tensorflow
              image: example.org/multi_worker_strategy:v1
              volumeMounts:
                - mountPath: /train
                  name: training
              resources:
                limits:
                  nvidia.com/gpu: 1
          volumes:
            - name: training
              persistentVolumeClaim:
                claimName: strategy-volume
"""

#: The shape of Kubeflow's mnist_with_summaries and estimator examples: a namespace, a command list, a pod
#: annotation, cleanPodPolicy None.
KUBEFLOW_SUMMARIES = """\
apiVersion: "kubeflow.org/v1"
kind: "TFJob"
metadata:
  name: "mnist"
  namespace: kubeflow
spec:
  runPolicy:
    cleanPodPolicy: None
  tfReplicaSpecs:
    Worker:
      replicas: 1
      restartPolicy: Never
      template:
        metadata:
          annotations:
            scheduling.k8s.io/group-name: "mnist"
        spec:
          containers:
            - name: tensorflow
              image: example.org/tf-mnist-with-summaries:1.0
              command:
                - "python"
                - "/var/tf_mnist/mnist_with_summaries.py"
                - "--log_dir=/train/logs"
"""

CLEAN_POD_NOTE = "spec.runPolicy.cleanPodPolicy: tfcluster deletes the pods still running once the job ended"


@pytest.mark.parametrize(("text", "line"), [(KUBEFLOW_MULTI_WORKER, 7), (KUBEFLOW_SUMMARIES, 8)])
def test_kubeflow_example_shapes_are_taken_with_one_warning_line(cli: CliRunner, tmp_path: Path, text: str,
                                                                 line: int) -> None:
    path = _write(tmp_path, text)
    for command in (["validate", str(path), "-b", "k8s"], ["dry-run", str(path), "-b", "k8s"]):
        result = cli.invoke(main, command)
        assert result.exit_code == 0, (command, result.output)
        assert result.stderr == f"warning: {path}:{line}: {CLEAN_POD_NOTE} (as Running); what the job computes is the same\n"
    converted = cli.invoke(main, ["convert", str(path)])
    assert converted.exit_code == 0 and converted.stderr == ""
    assert f"# note: {CLEAN_POD_NOTE}" in converted.stdout


def test_an_unknown_clean_pod_policy_is_still_refused(cli: CliRunner, tmp_path: Path) -> None:
    path = _write(tmp_path, KUBEFLOW_SUMMARIES.replace("cleanPodPolicy: None", "cleanPodPolicy: Sometimes"))
    result = cli.invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr == (f"{path}:8: spec.runPolicy.cleanPodPolicy: not carried: unknown value 'Sometimes' "
                             "(allowed: None, Running, All)\n")


def test_pod_annotations_warn_off_kubernetes_instead_of_refusing(cli: CliRunner, tmp_path: Path) -> None:
    path = _write(tmp_path, KUBEFLOW_SUMMARIES)
    result = cli.invoke(main, ["dry-run", str(path), "-b", "compose"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"warning: {path}:8: {CLEAN_POD_NOTE} (as Running); what the job computes is the same",
        f"warning: {path}:15: spec.tfReplicaSpecs.Worker.template.metadata.annotations: no effect off Kubernetes "
        "(-b k8s carries it)"]
