"""A TFJob ``render --format tfjob`` exported reads back as the spec it came from: one vocabulary, both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from helpers.paths import REPO
from launcher import api
from launcher.cli.commands import main
from launcher.plan import naming
from launcher.spec import tfjob_vocabulary as vocabulary
from launcher.spec.models import ClusterSpec, RestartPolicy, RoleType, SuccessPolicy

TFJOB = REPO / "examples" / "tfjob.yaml"


def _carried(spec: ClusterSpec) -> dict:
    """What a TFJob carries of a spec (the training config lives in the exported ConfigMap, not in the TFJob)."""
    return spec.model_dump(include={"name", "roles", "restart", "success_policy", "deadline_seconds", "checkpoint",
                                    "kubernetes"}, exclude={"checkpoint": {"dir", "backup_every_steps"}})


def _export(cli: CliRunner, spec: Path, out: Path) -> Path:
    result = cli.invoke(main, ["render", str(spec), "-b", "k8s", "-d", str(out), "--format", "tfjob"])
    assert result.exit_code == 0, result.output
    return out / "tfjob.yaml"


def test_the_example_tfjob_exported_reads_back_to_the_same_spec(cli: CliRunner, tmp_path: Path) -> None:
    exported = _export(cli, TFJOB, tmp_path / "out")
    original = api.load_spec(TFJOB, "k8s")
    with pytest.warns(UserWarning, match="a TFJob tfcluster exported"):
        again = api.load_spec(exported, "k8s")
    assert _carried(again) == _carried(original)
    result = cli.invoke(main, ["validate", str(exported), "-b", "k8s"])
    assert result.exit_code == 0 and result.stderr.count("\n") == 1 and result.stderr.startswith("warning: ")


@pytest.mark.parametrize(("restart", "success"), [(r, s) for r in RestartPolicy for s in SuccessPolicy])
def test_every_restart_and_success_policy_and_role_survives_the_round_trip(
        cli: CliRunner, tmp_path: Path, restart: RestartPolicy, success: SuccessPolicy) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "rt", "command": ["python", "train.py"], "image": "example.org/img:1",
        "roles": {"chief": {}, "worker": {"replicas": 3, "env": {"A": "1"}}, "ps": {"replicas": 2}, "evaluator": {}},
        "restart": {"policy": restart.value, "max_restarts": 7}, "success_policy": success.value,
        "deadline_seconds": 99, "checkpoint": {"save_grace_seconds": 42},
        "kubernetes": {"namespace": "team", "labels": {"team": "vision"}, "node_selector": {"pool": "gpu"}},
    }))
    exported = _export(cli, spec, tmp_path / "out")
    converted = cli.invoke(main, ["convert", str(exported)])
    assert converted.exit_code == 0, converted.output
    back = tmp_path / "back.yaml"
    back.write_text(converted.stdout)
    original, again = api.load_spec(spec, "k8s"), api.load_spec(back, "k8s")
    assert {role: again.roles.replicas(role) for role in RoleType} == {RoleType.CHIEF: 1, RoleType.WORKER: 3,
                                                                       RoleType.PS: 2, RoleType.EVALUATOR: 1}
    assert (again.restart.policy, again.restart.max_restarts, again.success_policy) == (restart, 7, success)
    assert (again.deadline_seconds, again.checkpoint.save_grace_seconds) == (99, 42)
    assert again.kubernetes.labels == original.kubernetes.labels
    assert again.kubernetes.node_selector == original.kubernetes.node_selector
    assert again.kubernetes.namespace == "team" and again.roles.role(RoleType.WORKER).env == {"A": "1"}


def test_every_label_tfcluster_puts_on_a_tfjob_is_one_the_reader_drops() -> None:
    """The reader's notion of tfcluster's own labels (vocabulary) covers what the planner's naming writes."""
    for labels in (naming.labels("c", "run", RoleType.WORKER), naming.labels("c", "run", None)):
        for key, value in labels.items():
            assert key.startswith(vocabulary.OWN_LABEL_PREFIX) or (key, value) == vocabulary.MANAGED_BY, key


def test_a_tfjob_not_exported_by_tfcluster_keeps_its_hardening_fields_refused(cli: CliRunner, tmp_path: Path) -> None:
    """Only tfcluster's own export is read leniently: another TFJob's securityContext is still not carried."""
    data = yaml.safe_load(TFJOB.read_text())
    data["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["securityContext"] = {"runAsUser": 0}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli.invoke(main, ["validate", str(path), "-b", "k8s"])
    assert result.exit_code == 2
    assert "spec.tfReplicaSpecs.Chief.template.spec.securityContext: not carried" in result.stderr
