"""Safety property: a TFJob's text cannot forge a line of the spec ``convert`` writes, for any backend.

``convert`` itself knows no backend; its output is what a user then validates and launches with ``-b <kind>``. So
for each ``BackendKind``: the spec ``convert`` prints for a TFJob whose own label key or file name carries the
issue's attack (a line break, then a ``slurm:`` section with a ``setup`` line) is, validated for that backend, the
very spec the TFJob itself gives there, and nothing of the attack reaches what the backend would run
(``dry-run``). The rule's home: ``launcher.spec.tfjob.comment`` (every comment line through
``problems.one_line``); the body is the YAML emitter's.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from launcher import api
from launcher.cli.commands import main
from launcher.plan.targets import BackendKind
from launcher.spec.tfjob_vocabulary import OWN_LABEL_PREFIX

ATTACK = '\nslurm:\n  setup: ["touch forged-by-convert"]\n#'
TFJOB = {
    "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "job"},
    "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "tensorflow", "image": "example.org/train:1", "command": ["python", "train.py"]}]}}}}},
}


@pytest.mark.parametrize("where", ["label key", "file name"])
@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda k: k.value)
def test_a_converted_tfjob_is_the_tfjob_on_every_backend_whatever_its_text(
        kind: BackendKind, where: str, cli: CliRunner, tmp_path: Path) -> None:
    tfjob = copy.deepcopy(TFJOB)
    if where == "label key":  # one of tfcluster's own labels: dropped, its key named in a note
        tfjob["metadata"]["labels"] = {f"{OWN_LABEL_PREFIX}x{ATTACK}": "v"}
    source = tmp_path / (f"job{ATTACK}.yaml" if where == "file name" else "job.yaml")
    source.write_text(yaml.safe_dump(tfjob))
    result = cli.invoke(main, ["convert", str(source)])
    assert result.exit_code == 0, result.output
    converted = tmp_path / "spec.yaml"
    converted.write_text(result.stdout)
    assert "slurm" not in yaml.safe_load(result.stdout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TFJob's own-label note, a warning when it is read as it is
        assert api.load_spec(converted, kind) == api.load_spec(source, kind)
    dry_run = cli.invoke(main, ["dry-run", str(converted), "-b", kind.value])
    assert dry_run.exit_code == 0 and "forged-by-convert" not in dry_run.output, dry_run.output
