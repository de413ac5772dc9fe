"""``dry-run -o json|plan|text`` stream task by task: the same bytes as the whole document, in linear memory
(4,300 workers: SHA-256 of the output under a 512 MiB limit == SHA-256 of the whole document)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from helpers.paths import EXAMPLES
from launcher import api
from launcher.cli.views import render_text
from launcher.plan.dryrun import json_chunks, plan_document, plan_entries, plan_settings, task_entries, tasks_document

MIB = 1024**2
COLUMNS = 120


@pytest.mark.parametrize("backend", ["local", "compose", "k8s"])
@pytest.mark.parametrize("example", ["demo", "parameter-server", "reference"])
def test_streamed_documents_equal_the_whole_ones(example: str, backend: str) -> None:
    dry_run = api.dry_run(EXAMPLES / f"{example}.yaml", backend)
    plan = dry_run.plan
    streamed = "".join(json_chunks(task_entries(plan), shared=[plan.cluster]))
    assert streamed == json.dumps(tasks_document(plan), indent=2)
    streamed = "".join(json_chunks(plan_entries(plan), plan_settings(dry_run), shared=[plan.cluster]))
    assert streamed == json.dumps(plan_document(dry_run), indent=2)


@pytest.mark.parametrize("entries, settings", [
    ([], {}),
    ([{}], {"empty": [], "nested": {"a": [{}, [], {"b": None}], "c": "x\ny \u00e9"}}),
    ([{"n": 1.5, "t": True, "k": {1: "a", None: 2}}], {"odd": {2: [1, {"x": []}]}}),
])
def test_streamed_json_is_json_dumps_for_any_shape(entries: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    shared = {"cluster": ["a", "b"]}
    entries = [*entries, {"tf_config": shared}, {"tf_config": shared}]
    assert "".join(json_chunks(entries, settings, shared=[shared])) == \
        json.dumps({"tasks": entries, **settings}, indent=2)


class _Digest:
    """A write-only text file that keeps only the SHA-256 and the size of what was written."""

    def __init__(self) -> None:
        self.sha, self.size = hashlib.sha256(), 0

    def write(self, text: str) -> int:
        data = text.encode()
        self.sha.update(data)
        self.size += len(data)
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


def dry_run_limited(spec: Path, output: str, address_space: int) -> tuple[int, _Digest, str]:
    """``tfcluster dry-run -o OUTPUT`` under an address-space limit: (exit code, digest of its stdout, stderr)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    process = subprocess.Popen([sys.executable, "-m", "launcher", "dry-run", str(spec), "-o", output],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit,
                               env={**os.environ, "COLUMNS": str(COLUMNS)})
    assert process.stdout is not None and process.stderr is not None
    digest = _Digest()
    while chunk := process.stdout.read(1 << 20):
        digest.sha.update(chunk)
        digest.size += len(chunk)
    return process.wait(timeout=600), digest, process.stderr.read().decode()


def unstreamed(spec: Path, output: str) -> _Digest:
    """The digest of the whole document the CLI streams: the standard library's own JSON encoder over
    ``tasks_document`` (``json.dumps``, chunk by chunk), or the text view rendered in this process without a limit."""
    digest = _Digest()
    dry_run = api.dry_run(spec, "local")
    if output == "json":
        for chunk in json.JSONEncoder(indent=2).iterencode(tasks_document(dry_run.plan)):
            digest.write(chunk)
        digest.write("\n")
    else:
        render_text(plan_document(dry_run), Console(file=digest, highlight=False, soft_wrap=True, width=COLUMNS))  # type: ignore[arg-type]
    return digest


@pytest.mark.parametrize("output", ["json", "text"])
def test_a_dry_run_over_half_its_address_space_limit_streams_the_whole_document(tmp_path: Path, output: str) -> None:
    """The output is quadratic in the workers (each TF_CONFIG lists every task): 4,300 give ~575 MB of JSON
    (more than the limit itself) and ~335 MB of text, each over half the 512 MiB the process may map, so holding
    the document (and encoding it) could not fit; the process alone needs ~70 MB."""
    limit = 512 * MIB
    spec = tmp_path / "big.yaml"
    spec.write_text("name: big\nroles: {chief: {}, worker: {replicas: 4300}}\n")
    code, streamed, stderr = dry_run_limited(spec, output, limit)
    assert code == 0, stderr
    assert streamed.size > limit / 2, "the output of 4,300 TF_CONFIGs listing 4,301 tasks is quadratic"
    whole = unstreamed(spec, output)
    assert (streamed.size, streamed.sha.hexdigest()) == (whole.size, whole.sha.hexdigest())
