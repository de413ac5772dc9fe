"""Under parameter_server tf_keras' BackupAndRestore skips its batch hooks, so backups are per epoch whatever the
spec says: a stated ``checkpoint.backup_every_steps`` (steps or ``auto``) is one located line and exit 2, never
silently turned into per-epoch backups; unstated or ``null`` (what PSS does) is valid."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.api import parse_spec
from launcher.cli.commands import main
from launcher.spec.problems import SpecError

PSS = "name: d\nstrategy: parameter_server\nroles: {chief: {}, worker: {replicas: 2}, ps: {}}\n"


@pytest.mark.parametrize("every", ["50", "100", "auto"])
def test_a_stated_interval_under_pss_is_one_located_line_naming_what_to_use(every: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(f"{PSS}checkpoint:\n  backup_every_steps: {every}\n", source="s.yaml")
    assert str(info.value).splitlines() == [
        f"s.yaml:5: checkpoint.backup_every_steps: {every} is not taken by parameter_server, which backs up once per "
        "epoch (tf_keras skips step backups under ParameterServerStrategy): remove it or set null, or use "
        "multi_worker_mirrored for backups every N steps"]


@pytest.mark.parametrize("checkpoint", ["", "checkpoint: {backup_every_steps: null}\n"])
def test_unstated_or_null_under_pss_is_valid_and_plans_per_epoch_backups(checkpoint: str) -> None:
    from launcher import api

    spec = parse_spec(PSS + checkpoint)
    assert api.plan(spec, "local", "r1").run_config.backup_every_steps is None


def test_the_same_interval_under_mwms_is_valid() -> None:
    spec = parse_spec("name: d\nroles: {worker: {replicas: 2}}\ncheckpoint: {backup_every_steps: 50}\n")
    assert spec.checkpoint.backup_every_steps == 50


def test_validate_exits_2_with_the_line_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(f"{PSS}checkpoint: {{backup_every_steps: 20}}\n")
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2
    assert "x.yaml:4: checkpoint.backup_every_steps: 20 is not taken by parameter_server" in result.output
    assert "Traceback" not in result.output
