"""Every number a spec or a TFJob holds, in any field or key, is one it can use or one problem line: an integer
beyond 64 bits (Python reads none of over 4,300 digits), a number that is not finite, a scalar whose explicit tag
its text does not fit. Exit 2, one line naming file, line and field, no traceback, in time linear in the text."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from helpers.paths import REPO
from launcher import api
from launcher.cli.commands import main
from launcher.spec.problems import SpecError

DIGITS = "9" * 5000
TFJOB = (REPO / "examples" / "tfjob.yaml").read_text()


def validate(path: Path) -> Result:
    """``tfcluster validate PATH`` (a traceback would be exit code 1, its exception in ``Result.exception``)."""
    return CliRunner().invoke(main, ["validate", str(path)])


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (DIGITS, "is an integer beyond 64 bits"),  # over Python's 4,300-digit limit: a ValueError in the YAML reader
        ("-" + DIGITS, "is an integer beyond 64 bits"),
        ("0x" + "f" * 4000, "is an integer beyond 64 bits"),  # read without the limit, shown with it
        ("0b1" + "0" * 64, "is an integer beyond 64 bits"),
        ("9223372036854775808", "is an integer beyond 64 bits"),
        ("1" + ":59" * 300_000, "is an integer beyond 64 bits"),  # sexagesimal: quadratic time to read
        ("1.0e+999", "is not a finite number"),
        (".inf", "is not a finite number"),
        (".nan", "is not a finite number"),
        ("!!int abc", "'abc' is not an integer, as its tag says"),
        ('!!int ""', "'' is not an integer, as its tag says"),
        ("!!float abc", "is not a number, as its tag says"),
        ("!!bool maybe", "is not a boolean, as its tag says"),
        ("!!timestamp 2020-13-45", "is not a date, as its tag says"),
    ],
    ids=lambda v: v[:20],
)
@pytest.mark.parametrize("field", ["roles.worker.replicas", "training.args.seed", "kubernetes.volumes.0.nfs.port"])
def test_a_number_no_field_takes_is_one_line_at_its_field(tmp_path: Path, value: str, says: str, field: str) -> None:
    spec = tmp_path / "spec.yaml"
    where = {
        "roles.worker.replicas": f"roles:\n  worker:\n    replicas: {value}\n",
        "training.args.seed": f"roles: {{worker: {{}}}}\ntraining:\n  args:\n    seed: {value}\n",
        "kubernetes.volumes.0.nfs.port": f"roles: {{worker: {{}}}}\nkubernetes:\n  volumes:\n    - name: data\n"
                                         f"      nfs: {{server: nas, path: /x, port: {value}}}\n",
    }
    spec.write_text("name: n\n" + where[field])
    result = validate(spec)
    assert result.exit_code == 2 and result.stdout == "", result.stderr[-2000:]
    [line] = result.stderr.splitlines()
    line_no = {"roles.worker.replicas": 4, "training.args.seed": 5, "kubernetes.volumes.0.nfs.port": 6}[field]
    assert line.startswith(f"{spec}:{line_no}: {field}: ") and says in line and len(line) < 300, line


def test_a_key_of_5000_digits_is_one_line_at_its_mapping(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: n\nroles: {{worker: {{}}}}\ntraining:\n  args:\n    ? {DIGITS}\n    : 1\n")
    result = validate(spec)
    assert result.exit_code == 2
    assert result.stderr == (f"{spec}:5: training.args: a key: '999999999999...999999999999' (5000 characters) "
                             "is an integer beyond 64 bits: no field takes one\n")


@pytest.mark.parametrize("value", [DIGITS, "1.0e+999"], ids=["digits", "overflow"])
def test_a_tfjob_number_no_field_takes_names_the_tfjob_field(tmp_path: Path, value: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(TFJOB.replace("backoffLimit: 4", f"backoffLimit: {value}"))
    result = validate(job)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{job}:10: spec.runPolicy.backoffLimit: "), line


def test_numbers_in_range_are_read_as_before(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: n\nroles: {worker: {replicas: 0x2}}\ntraining:\n  args: {big: 9223372036854775807, "
                    "small: -9223372036854775808, rate: 1.5e-3, hours: 1:30}\n")
    result = validate(spec)
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"roles": {"worker": {"replicas": 10**5000}}},
         "roles.worker.replicas: Input should be less than or equal to 10000 (got an integer of 16610 bits)"),
        ({"roles": {"worker": {"resources": {"cpu": -(10**5000)}}}},
         "roles.worker.resources.cpu: Input should be a valid number (got an integer of 16610 bits)"),
        ({"roles": {"worker": {}}, "restart": {"expected_mtbf": 10**5000}, "checkpoint": {"backup_every_steps": "auto"}},
         "restart.expected_mtbf: must be a finite duration"),
        ({"roles": {"worker": {}}, "restart": {"expected_mtbf": float("inf")},
          "checkpoint": {"backup_every_steps": "auto"}}, "restart.expected_mtbf: must be a finite duration"),
    ],
    ids=["int-replicas", "int-cpu", "int-duration", "inf-duration"],
)
def test_a_number_built_in_python_is_one_problem_too(data: dict, line: str) -> None:
    """``validate_data`` (a notebook's mapping) meets Python numbers YAML never makes: one problem each still."""
    with pytest.raises(SpecError) as info:
        api.validate_data({"name": "n", **data})
    assert str(info.value) == line
