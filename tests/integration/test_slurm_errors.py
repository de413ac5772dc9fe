"""The Slurm backend's one-line errors: bad ``slurm:`` values (exit 2) and a controller that does not answer (exit 1).

The unreachable controller is real: Slurm's own commands pointed (``SLURM_CONF``)
at a copy of the cluster's configuration whose controller port nothing listens on.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.local_cluster import tfcluster, write_spec
from helpers.required import unavailable
from launcher import api
from launcher.backends.slurm.state import SlurmState

pytestmark = pytest.mark.slurm

SLURM_CONF = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))


@pytest.mark.parametrize(("slurm", "field"), [
    ({"partition": "gpu nodes"}, "slurm.partition"),
    ({"time_limit": "2 hours"}, "slurm.time_limit"),
    ({"tasks_per_node": 0}, "slurm.tasks_per_node"),
    ({"sbatch_options": ["mail-type=END"]}, "slurm.sbatch_options.0"),
    ({"setup": ["module load cuda\nrm -rf ~"]}, "slurm.setup.0"),
    ({"exclusiv": True}, "slurm.exclusiv"),
])
def test_bad_slurm_values_are_one_line_exit_2(tmp_path: Path, slurm: dict[str, object], field: str) -> None:
    path = write_spec(tmp_path, {"name": "bad", "roles": {"worker": {"replicas": 2}}, "slurm": slurm})
    result = tfcluster("validate", "-b", "slurm", str(path), cwd=tmp_path)
    assert result.returncode == 2, result
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"{path}:") and f": {field}: " in line, line


def test_a_node_local_checkpoint_dir_is_refused(tmp_path: Path) -> None:
    path = write_spec(tmp_path, {"name": "bad", "roles": {"worker": {"replicas": 2}},
                                 "checkpoint": {"dir": "/tmp/ckpt"}})
    assert tfcluster("validate", str(path), cwd=tmp_path).returncode == 0  # fine on local
    result = tfcluster("validate", "-b", "slurm", str(path), cwd=tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert ": checkpoint.dir: " in line and "local to each node" in line, line


@pytest.fixture
def unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not SLURM_CONF.is_file():
        unavailable(f"no Slurm configuration at {SLURM_CONF} (.ci/slurm.sh writes one)", "slurm")
    lines = [line for line in SLURM_CONF.read_text().splitlines() if not line.startswith(("SlurmctldPort", "MessageTimeout"))]
    conf = tmp_path / "slurm.conf"
    # port 1: nothing listens; MessageTimeout=1: each Slurm command gives up at once (2 made each wait 1 s)
    conf.write_text("\n".join([*lines, "SlurmctldPort=1", "MessageTimeout=1"]) + "\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))


@pytest.mark.usefixtures("unreachable")
def test_an_unreachable_controller_is_one_line_exit_1(tmp_path: Path) -> None:
    path = write_spec(tmp_path, {"name": "away", "roles": {"worker": {"replicas": 2}}})
    up = tfcluster("up", "-b", "slurm", "-d", str(path), cwd=tmp_path)
    assert up.returncode == 1 and "Unable to contact slurm controller" in up.stderr, up
    assert len(up.stderr.strip().splitlines()) == 1 and not SlurmState.named("away").exists()  # nothing half-made
    SlurmState.named("away").create(api.plan(path, "slurm"))
    SlurmState.named("away").job_id.write_text("1")
    for command in (["status", "away", "-b", "slurm"], ["down", "away", "-b", "slurm"]):
        result = tfcluster(*command, cwd=tmp_path)
        assert result.returncode == 1, result
        [line] = result.stderr.strip().splitlines()
        assert "the Slurm controller does not answer" in line and "Traceback" not in result.stderr, line
