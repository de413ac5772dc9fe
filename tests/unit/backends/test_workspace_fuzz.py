"""Property test: random and hostile workspace trees and ``.dockerignore`` files, fed to the scan and to
``dry-run -b compose|k8s -o plan``: exit 0 with only regular files of the tree listed, or exit 2 with one line
per problem; never a traceback, never a hang (pytest-timeout bounds each example set)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from launcher.cli.commands import main

#: Names that matter: credentials, never-shipped dirs, the ignore file itself, odd but legal ones.
NAMES = st.sampled_from([".env", ".git", ".venv", ".aws", "id_rsa", "a", "b.py", "x.pem", ".dockerignore", "tfcluster-runs",
                         "sp ace", "ü", "new\nline", "\x1b[31mred", "-", "*", "[", "!x", "a\\b"]) | st.binary(min_size=1, max_size=6).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")).map(os.fsdecode)
KINDS = st.sampled_from(["file", "dir", "link-out", "link-in", "link-dangling", "link-loop", "fifo"])
PATTERN_PARTS = st.sampled_from(["*", "**", "?", "[", "]", "[!a]", "[^a]", "[a-z]", "!", "\\", "/", ".", "..", "a", ".env", "#",
                                 " ", "\n", "\r\n", "x.pem", ".git", "**/", "*a*a*a*a*a*a*b"])
IGNORE = st.one_of(st.lists(PATTERN_PARTS, max_size=30).map(lambda parts: "".join(parts).encode()),
                   st.binary(max_size=60))
ONE_LINE_PROBLEM = re.compile(r"^(\S+?:(\d+:)? )?[\w.()-]+: \S.*$")
FUZZ = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def build(root: Path, outside: Path, entries: list[tuple[list[str], str, bytes]], ignore: bytes | None) -> None:
    for parts, kind, content in entries:
        path = root.joinpath(*parts)
        if os.path.lexists(path):
            continue  # an earlier entry took the name (writing a FIFO it made would block)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "file":
                path.write_bytes(content)
            elif kind == "dir":
                path.mkdir(exist_ok=True)
            elif kind == "fifo":
                os.mkfifo(path)
            else:
                target = {"link-out": outside, "link-in": root, "link-dangling": root / "nowhere", "link-loop": path}[kind]
                path.symlink_to(target)
        except (FileExistsError, NotADirectoryError, OSError):
            continue  # the tree is what it is: an earlier entry took the name
    ignore_file = root / ".dockerignore"
    if ignore is not None and not ignore_file.is_symlink() and (ignore_file.is_file() or not ignore_file.exists()):
        ignore_file.write_bytes(ignore)  # (a FIFO there stays one: writing it would block)


def only_regular_files_of(root: Path, listed: list[str]) -> None:
    for relative in listed:
        path = root
        for part in relative.split("/"):
            path = path / part
            assert not path.is_symlink(), relative
        assert path.is_file(), relative


@pytest.mark.timeout(600)
@FUZZ
@given(entries=st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=4), KINDS, st.binary(max_size=20)), max_size=12),
       ignore=st.none() | IGNORE, backend=st.sampled_from(["compose", "k8s"]))
def test_hostile_trees_and_dockerignores_plan_or_fail_in_one_line(entries, ignore, backend, cli) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        base = Path(temporary)
        root, outside = base / "ws", base / "outside"
        root.mkdir()
        (outside / ".ssh").mkdir(parents=True)
        (outside / ".ssh" / "id_rsa").write_text("secret")
        build(root, outside, entries, ignore)
        spec = base / "spec.yaml"
        spec.write_text(yaml.safe_dump({"name": "fuzz", "workspace": str(root), "roles": {"worker": {"replicas": 1}}}))
        registry = ["--registry", "127.0.0.1:5000"] if backend == "k8s" else []
        result = cli.invoke(main, ["dry-run", str(spec), "-b", backend, "-o", "plan", *registry])
        assert "Traceback" not in result.output
        assert result.exit_code in (0, 2), (result.exit_code, result.output, result.exception)
        if result.exit_code == 2:
            lines = result.stderr.strip().splitlines()
            assert lines and all(ONE_LINE_PROBLEM.match(line) for line in lines), result.stderr
            return
        files = json.loads(result.stdout)["workspace"]["source"]["files"]
        only_regular_files_of(root, files)
        assert files == sorted(files)
        if not ignore or b"!" not in ignore:  # nothing taken back: no credential, nothing never shipped
            assert not {".env", ".git", ".venv", "id_rsa", "x.pem", ".aws"} & {part for f in files for part in f.split("/")}
