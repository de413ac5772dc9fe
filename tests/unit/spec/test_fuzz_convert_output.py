"""Fuzz ``convert``'s output: TFJobs with hostile text wherever text can reach a comment (names, label keys and
values, unknown fields and values, replica types, resources, ports, policies) and in the file's own name.

What ``convert`` prints must parse back as YAML into exactly the spec mapping the converter built
(``loader.load_tfjob(path).data``), headed by one comment line per thing the converter reported, whatever
breaks a line (``\\n``, ``\\r``, ``\\x85``, U+2028, U+2029, and the ones Python's ``splitlines`` also takes);
a malformed TFJob is refused with exit 2 and one line per problem. Derandomized (the same examples
every run), like every fuzz file of the suite.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launcher.cli.commands import main
from launcher.spec import loader
from launcher.spec.problems import SpecError
from launcher.spec.tfjob_vocabulary import API_VERSION, KIND, OWN_LABEL_PREFIX, PORT_NAME, RESTART_OF, ROLE_OF

FUZZ = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

#: Everything some reader takes for the end of a line: YAML's breaks, then the others of Python's splitlines.
BREAKS = ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
#: Pieces that, on a line of their own, would be live YAML, drive a terminal, or that no YAML stream may carry.
PIECES = [*BREAKS, "slurm:", '  setup: ["touch pwned"]', "#", "# ", ": ", "- ", "---", "...", "&a", "*a", "!!str",
          "\x1b[2J", "\x00", "\t", "\ufeff", "\u202e", "\ud800", "\udc80", "\ufffe", "\uffff", "'", '"', "\\",
          "\\n", ".", "/", OWN_LABEL_PREFIX, "ü", "x"]
HOSTILE = st.lists(st.sampled_from(BREAKS) | st.sampled_from(PIECES) | st.text(max_size=4), max_size=6).map("".join)
#: What a file on Linux can be named: no ``/`` or NUL, and of the lone surrogates only those that stand for a byte
#: that is not UTF-8 (``os.fsdecode``'s surrogateescape).
FILE_NAMES = HOSTILE.map(lambda s: "job" + "".join(
    "_" if c in "/\0" or ("\ud800" <= c < "\udc80") or "\udd00" <= c <= "\udfff" else c for c in s)[:60] + ".yaml")
NUMBERS = st.integers(-1, 3) | st.sampled_from([8080, 2**40])


def _some(keys: st.SearchStrategy[Any], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[Any, Any]]:
    return st.dictionaries(keys, values, max_size=3)


LABELS = _some(HOSTILE | HOSTILE.map(lambda s: OWN_LABEL_PREFIX + s), HOSTILE | NUMBERS)
#: Fields no TFJob has: each one a "not carried" comment naming its path.
UNKNOWN = _some(HOSTILE, HOSTILE)


def _with(optional: dict[str, st.SearchStrategy[Any]],
          required: dict[str, st.SearchStrategy[Any]] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping with the ``required`` fields, any of the ``optional`` ones, and fields no TFJob has."""
    return st.builds(lambda unknown, fields: {**unknown, **fields}, UNKNOWN,
                     st.fixed_dictionaries(required or {}, optional=optional))


CONTAINER = _with({
    "image": HOSTILE,
    "command": st.lists(HOSTILE, max_size=3) | HOSTILE,  # one string: malformed, refused
    "args": st.lists(HOSTILE, max_size=3),
    "env": st.lists(st.fixed_dictionaries({"name": HOSTILE | NUMBERS, "value": HOSTILE}), max_size=2),
    "resources": _with({"limits": _some(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]) | HOSTILE,
                                        HOSTILE | NUMBERS),
                        "requests": _some(st.sampled_from(["cpu", "memory"]) | HOSTILE, HOSTILE | NUMBERS)}),
    "ports": st.lists(_with({"name": st.just(PORT_NAME) | HOSTILE, "containerPort": NUMBERS, "hostPort": NUMBERS}),
                      max_size=2),
    "imagePullPolicy": st.sampled_from(["Always", "IfNotPresent"]) | HOSTILE,
}, required={"name": st.just("tensorflow") | HOSTILE})
POD = _with({"nodeSelector": LABELS, "terminationGracePeriodSeconds": NUMBERS},
            required={"containers": st.lists(CONTAINER, min_size=1, max_size=2)})
TEMPLATE = _with({"metadata": _with({"labels": LABELS, "annotations": _some(HOSTILE, HOSTILE)})},
                 required={"spec": POD})
REPLICA = _with({"replicas": NUMBERS, "restartPolicy": st.sampled_from(list(RESTART_OF)) | HOSTILE},
                required={"template": TEMPLATE})
TFJOBS = st.builds(lambda fields: {**fields, "apiVersion": API_VERSION, "kind": KIND}, _with({}, required={
    "metadata": _with({"namespace": HOSTILE, "annotations": _some(HOSTILE, HOSTILE)},
                      required={"name": HOSTILE, "labels": LABELS}),
    "spec": _with({
        "runPolicy": _with({"cleanPodPolicy": st.sampled_from(["None", "Running", "All"]) | HOSTILE,
                            "backoffLimit": NUMBERS, "activeDeadlineSeconds": NUMBERS}),
        "successPolicy": st.sampled_from(["", "AllWorkers", "ChiefWorker"]) | HOSTILE,
    }, required={"tfReplicaSpecs": _some(st.sampled_from(list(ROLE_OF)) | HOSTILE, REPLICA)}),
}))


@FUZZ
@given(document=TFJOBS, name=FILE_NAMES)
def test_convert_output_parses_back_to_the_converted_spec_under_one_line_comments(
        document: dict[str, Any], name: str, cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document))
    result = cli.invoke(main, ["convert", str(path)])
    try:
        converted = loader.load_tfjob(path)
    except SpecError as refused:
        assert result.exit_code == 2 and result.stdout == "", result.output
        lines = result.stderr.splitlines()
        assert len(lines) == len(refused.problems) and "\x1b" not in result.stderr, lines  # one line each
        return
    assert result.exit_code == 0, (result.output, result.exception)
    text = result.stdout_bytes.decode("utf-8")
    said = converted.dropped + converted.notes + converted.kubernetes_only + converted.kubernetes_inert
    header = list(itertools.takewhile(lambda line: line.startswith("#"), text.splitlines()))
    assert len(header) == 1 + len(said), header  # the file's line, then one line per problem, however it breaks
    assert yaml.safe_load(text) == converted.data
