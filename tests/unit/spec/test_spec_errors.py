"""Each validation rule gives its own clear, located message; valid specs get sensible defaults."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from launcher.api import parse_spec, plan, tasks_document
from launcher.cli.commands import main
from launcher.spec.models import Strategy
from launcher.spec.problems import SpecError

MINIMAL = """\
name: demo
strategy: auto
roles:
  chief:     {replicas: 1}
  worker:    {replicas: 2}
  ps:        {replicas: 1}
  evaluator: {replicas: 1}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="s.yaml")
    return str(info.value).splitlines()


def test_minimal_spec_from_the_issue_plans_parameter_server() -> None:
    spec = parse_spec(MINIMAL)
    result = plan(spec)
    assert result.strategy is Strategy.PARAMETER_SERVER
    assert [t.name for t in result.tasks] == [
        "demo-chief-0", "demo-worker-0", "demo-worker-1", "demo-ps-0", "demo-evaluator-0",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: Demo\nroles: {worker: {}}\n", "s.yaml:1: name: must be a DNS-1123 label"),
        ("name: " + "a" * 53 + "\nroles: {worker: {replicas: 2}}\n", "s.yaml:1: name: too long: derived name"),
        ("name: d\nroles: {chief: {replicas: 2}}\n", "s.yaml:2: roles.chief.replicas: at most one chief"),
        ("name: d\nroles: {worker: {}, evaluator: {replicas: 2}}\n", "roles.evaluator.replicas: at most one evaluator"),
        ("name: d\nroles: {evaluator: {}}\n", "roles: needs a chief or at least one worker"),
        ("name: d\nroles:\n  worker: {}\n  master: {}\n", "s.yaml:4: roles.master: unknown field"),
        ("name: d\nroles: {wroker: {}}\n", "roles.wroker: unknown field; did you mean 'worker'?"),
        ("name: d\nroles: {worker: {replicas: 20000}}\n", "roles.worker.replicas: Input should be less than or equal to 10000 (got 20000)"),
        ("name: d\nroles: {worker: {port: 70000}}\n", "roles.worker.port: Input should be less than or equal to 65535"),
        ("name: d\nroles: {worker: {}}\ncheckpoint: {backup_every_steps: often}\n",
         "s.yaml:3: checkpoint.backup_every_steps: a number of steps, auto, or null (got 'often')"),
        ("name: d\nroles: {worker: {}}\ncheckpoint: {backup_every_steps: 0}\n",
         "checkpoint.backup_every_steps: between 1 and 10000000 steps (got 0)"),
        ("name: d\nroles: {worker: {}}\nrestart: {expected_mtbf: often}\n",
         "s.yaml:3: restart.expected_mtbf: a duration such as 90s, 30m, 1h30m, 2d or a number of seconds (got 'often')"),
        ("name: d\nroles: {worker: {}}\nrestart: {expected_mtbf: 0}\n", "restart.expected_mtbf: must be a positive duration (got 0)"),
        ("name: d\nroles: {worker: {}}\nrestart: {expected_mtbf: -1h}\n",
         "restart.expected_mtbf: must be a positive duration (got '-1h')"),
        ("name: d\nstrategy: parameter_server\nroles: {chief: {}, worker: {}}\n", "roles.ps.replicas: parameter_server needs at least 1 ps"),
        ("name: d\nstrategy: parameter_server\nroles: {chief: {}, ps: {}}\n", "roles.worker.replicas: parameter_server needs at least 1 worker"),
        ("name: d\nroles: {worker: {}, ps: {}}\n", "roles.chief.replicas: parameter_server needs a chief (the coordinator)"),
        ("name: d\nstrategy: multi_worker_mirrored\nroles: {worker: {}, ps: {}}\n",
         "roles.ps.replicas: multi_worker_mirrored does not use parameter servers"),
        ("name: d\nstrategy: mirrored\nroles: {worker: {replicas: 2}}\n", "strategy: mirrored trains in one task"),
        ("name: d\nstrategy: tpu\nroles: {worker: {}}\n", "tpu: strategy tpu needs tpu.name"),
        ("name: d\ncollective: ring\nroles: {worker: {}}\n", "collective: only applies to multi_worker_mirrored"),
        ("name: d\ncollective: nccl\nroles: {worker: {replicas: 2}}\n", "collective: nccl needs GPUs"),
        ("name: d\nstrategy: multi_worker_mirored\nroles: {worker: {}}\n", "did you mean 'multi_worker_mirrored'?"),
        ("name: d\nroles: {worker: {resources: {memory: lots}}}\n", "roles.worker.resources.memory: must be a byte quantity such as 512Mi or 4Gi"),
        ("name: d\nroles: {worker: {resources: {memory: 512m}}}\n", "(Mi = MiB; 'm' would mean 1/1000 byte) (got '512m')"),
        ("name: d\nroles: {worker: {resources: {memory: 1Ki}}}\n", "roles.worker.resources.memory: is 1024 bytes; a task needs at least 6Mi"),
        ("name: d\nenv: {TF_CONFIG: x}\nroles: {worker: {}}\n", "s.yaml:2: env.TF_CONFIG: is set by tfcluster and cannot be overridden"),
        ("name: d\nroles: {worker: {env: {TFCLUSTER_JOB: x}}}\n", "roles.worker.env.TFCLUSTER_JOB: is set by tfcluster"),
        ("name: d\nroles: {worker: {}}\nroles: {chief: {}}\n", "s.yaml:3: roles: duplicate key"),
        ("name: d\nroles: [\n", "not valid YAML"),
        ("- 1\n", "the spec must be a mapping of fields, not a list"),
        ("", "the spec must be a mapping of fields, not nothing"),
        ("name: d\nrestart: {policy: sometimes}\nroles: {worker: {}}\n",
         "restart.policy: Input should be 'never', 'on-failure', 'exit-code' or 'always'"),
        ("name: d\ntraining: {module: my-module}\nroles: {worker: {}}\n", "training.module: must be a dotted Python module name"),
    ],
)
def test_each_rule_has_its_own_message(text: str, expected: str) -> None:
    assert any(expected in line for line in problems(text)), problems(text)


def test_every_bad_env_key_has_its_own_line() -> None:
    lines = problems('name: d\nenv: {TF_CONFIG: a, "bad name": b, OK: c}\nroles: {worker: {}}\n')
    assert sorted(lines) == ['s.yaml:2: env."bad name": is not a valid environment variable name',
                             's.yaml:2: env.TF_CONFIG: is set by tfcluster and cannot be overridden']


def test_a_key_with_dots_is_located_at_its_own_line() -> None:
    lines = problems('name: d\nroles: {worker: {}}\nkubernetes:\n  pod_labels:\n    app: ok\n'
                     '    tfcluster.io/role: x\n    "a b": y\n')
    assert sorted(lines) == [
        's.yaml:6: kubernetes.pod_labels."tfcluster.io/role": is set by tfcluster or by Kubernetes\' Job controller',
        's.yaml:7: kubernetes.pod_labels."a b": is not a Kubernetes label key: an optional DNS subdomain and \'/\', '
        "then at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"]


def test_a_key_that_ends_in_a_line_break_is_quoted_in_its_path() -> None:
    """A path names a key bare only when the whole key is a plain word (a ``$`` anchor also took ``"nmae\\n"``)."""
    assert problems('name: d\nroles: {worker: {}}\n"nmae\\n": 1\n')[0].startswith('s.yaml:3: "nmae\\n": unknown field')


def test_name_too_long_names_a_task_that_exists() -> None:
    [line] = problems("name: " + "a" * 52 + "\nroles: {worker: {replicas: 2}}\n")
    assert "-checkpoints' is 64 chars" in line and "evaluator" not in line


def test_all_problems_are_reported_at_once() -> None:
    lines = problems("name: Bad\nstrategy: multi_worker_mirrored\nroles:\n  chief: {replicas: 2}\n  ps: {}\n  wroker: {}\n")
    joined = "\n".join(lines)
    for fragment in ("name:", "roles.wroker: unknown field", "roles.chief.replicas: at most one chief",
                     "roles.ps.replicas: multi_worker_mirrored does not use parameter servers"):
        assert fragment in joined
    assert len(lines) == 4


def test_real_cli_exit_code_and_stderr(tmp_path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: d\nroles: {chief: {replicas: 2}}\n")
    for command in ("validate", "dry-run", "up"):
        proc = subprocess.run([sys.executable, "-m", "launcher", command, str(spec)], capture_output=True, text=True)
        assert proc.returncode == 2, proc
        assert proc.stdout == ""
        assert proc.stderr.strip() == f"{spec}:2: roles.chief.replicas: at most one chief is allowed"


def test_dry_run_json_is_the_only_stdout(cli, write_spec) -> None:
    result = cli.invoke(main, ["dry-run", str(write_spec(MINIMAL)), "--output", "json"])
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert list(document) == ["tasks"]
    assert [list(t) for t in document["tasks"]] == [["name", "type", "index", "address", "tf_config"]] * 5
    assert document == tasks_document(plan(parse_spec(MINIMAL)))
    full = json.loads(cli.invoke(main, ["dry-run", str(write_spec(MINIMAL)), "--output", "plan"]).stdout)
    assert [{k: t[k] for k in ("name", "type", "index", "address", "tf_config")} for t in full["tasks"]] == document["tasks"]
    assert {"command", "env", "image"} <= set(full["tasks"][0]) and full["strategy"] == "parameter_server"


def test_schema_is_json_schema_of_the_spec(cli) -> None:
    result = cli.invoke(main, ["schema"])
    schema = json.loads(result.stdout)
    assert schema["type"] == "object" and set(schema["required"]) == {"name", "roles"}
    assert schema["properties"]["strategy"]["$ref"].endswith("Strategy")
    assert "multi_worker_mirrored" in schema["$defs"]["Strategy"]["enum"]
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("hostile", ["/a\nb.yaml:9: name: forged", "/\x1b[2J\x1b[31mred", "/a\rb", "/\x85\u2028\x00\x7f"])
def test_a_hostile_value_or_file_name_cannot_forge_a_line_or_drive_the_terminal(hostile: str) -> None:
    mount = f"{{name: v, mount_path: {json.dumps(hostile)}}}"
    text = f"name: d\nroles: {{worker: {{}}}}\nkubernetes:\n  volumes: [{{name: v, emptyDir: {{}}}}]\n" \
           f"  volume_mounts: [{mount}, {mount}]\n{json.dumps(hostile)}: 1\n"
    with pytest.raises(SpecError) as info:
        parse_spec(text, source=hostile)
    lines = str(info.value).splitlines()
    assert len(lines) == 2, lines
    for line in lines:
        assert line.isprintable() and "\x1b" not in line, line
    assert all(line.startswith(ascii(hostile)[1:-1]) for line in lines), lines
    assert any(line.endswith(f"a second mount at {ascii(hostile)[1:-1]}") for line in lines), lines


def test_text_no_utf_8_carries_is_escaped_in_its_one_line_and_a_key_of_it_is_no_traceback() -> None:
    """A lone surrogate (a file name's byte that is not UTF-8, or a YAML escape) and U+FFFE/U+FFFF: no terminal
    or YAML stream can carry them raw. Found by convert's fuzz: such a top-level key gave a traceback."""
    hostile = "/\udc80\ufffe\uffff"
    with pytest.raises(SpecError) as info:
        parse_spec(f"name: d\nroles: {{worker: {{}}}}\n{json.dumps(hostile)}: 1\n", source=hostile)
    lines = str(info.value).splitlines()
    assert lines and all(line.isascii() and line.isprintable() for line in lines), lines
    assert all(line.startswith("/\\udc80\\ufffe\\uffff:") for line in lines), lines
    assert lines[-1].endswith("unable to parse raw data as a unicode string (got '/\\udc80\\ufffe\\uffff')"), lines


def test_a_hostile_command_line_value_stays_on_one_line(tmp_path) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(main, ["validate", str(tmp_path / "x.yaml"), "-b", "lo\ncal\x1b[31m"])
    assert result.exit_code == 2
    assert result.stderr == ("tfcluster validate: Invalid value for '--backend' / '-b': 'lo\\ncal\\x1b[31m' is not one "
                             "of 'local', 'compose', 'k8s', 'slurm'.\n")
