"""Hostile specs are refused in bounded memory: one line, exit 2, no traceback."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.spec.loader import MAX_DEPTH, MAX_SPEC_BYTES

GIB = 1024**3


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The billion-laughs shape: each level a list of ``width`` aliases of the one below (1 kB of text)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join([*lines, "name: bomb", "roles: {worker: {}}", ""])


def validate_limited(path: Path, address_space: int = GIB) -> subprocess.CompletedProcess[str]:
    """``tfcluster validate`` under an address-space limit (what the machine would otherwise lose)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return subprocess.run([sys.executable, "-m", "launcher", "validate", str(path)],
                          capture_output=True, text=True, preexec_fn=limit, timeout=60)


def test_alias_bomb_is_refused_under_one_gib(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(alias_bomb())
    assert len(spec.read_bytes()) < 1024
    result = validate_limited(spec)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"{spec}:1: (spec): YAML aliases expand to over 100000 values: not a cluster spec\n"


def test_ordinary_aliases_are_still_fine(tmp_path: Path) -> None:
    spec = tmp_path / "ok.yaml"
    spec.write_text("name: ok\nroles:\n  chief: &same {resources: {cpu: 1}}\n  worker: *same\n")
    assert validate_limited(spec).returncode == 0


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "deep.yaml"
    depth = 100_000
    spec.write_text("name: deep\nroles: {worker: {}}\nx: " + "[" * depth + "]" * depth + "\n")
    result = validate_limited(spec)
    assert result.returncode == 2 and f"nested deeper than {MAX_DEPTH} levels" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_file_over_the_size_limit_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    spec = tmp_path / "huge.yaml"
    with open(spec, "w") as handle:
        handle.write("name: huge\nroles: {worker: {}}\n# " + "x" * (MAX_SPEC_BYTES + 10) + "\n")
    result = validate_limited(spec)
    assert result.returncode == 2
    assert result.stderr == f"{spec}: (spec): the file is over 1024 KiB: not a cluster spec\n"


@pytest.mark.parametrize("workers", [10_000])
def test_the_largest_valid_spec_validates_under_the_limit(tmp_path: Path, workers: int) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text(f"name: big\nroles: {{chief: {{}}, worker: {{replicas: {workers}}}}}\n")
    assert validate_limited(spec).returncode == 0


def alias_nesting(levels: int = 40, width: int = 60) -> str:
    """Nesting built from aliases: each level an alias of the one below, placed ``width`` brackets deep, before a
    shallow alias of it (so a walk that memoizes a node at its first, shallow, place would miss the depth)."""
    lines = ["name: deep", "roles: {worker: {}}", "x:", "  a0: &a0 " + "[" * width + "1" + "]" * width]
    for level in range(1, levels):
        lines.append(f"  a{level}: &a{level} [" + "[" * width + f"*a{level - 1}" + "]" * width + f", *a{level - 1}]")
    return "\n".join(lines) + "\n"


def test_nesting_built_from_aliases_is_refused_under_one_gib(tmp_path: Path) -> None:
    spec = tmp_path / "aliased.yaml"
    spec.write_text(alias_nesting())
    assert len(spec.read_bytes()) < 8 * 1024
    result = validate_limited(spec)
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"{spec}:1: (spec): not valid YAML for a spec: nested deeper than {MAX_DEPTH} levels\n"


def test_a_deep_alias_before_a_shallow_one_counts_as_deep(tmp_path: Path) -> None:
    """Under the depth limit where each alias stands, over it where the deep one expands."""
    half = MAX_DEPTH // 2 + 2
    deep = "[" * half + "1" + "]" * half
    spec = tmp_path / "two.yaml"
    spec.write_text(f"name: d\nroles: {{worker: {{}}}}\na: &a {deep}\nb: [{'[' * half}*a{']' * half}, *a]\n")
    result = validate_limited(spec)
    assert result.returncode == 2 and f"nested deeper than {MAX_DEPTH} levels" in result.stderr, result.stderr


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "loop.yaml"
    spec.write_text("name: d\nroles: {worker: {}}\nenv: &loop {A: [*loop]}\n")
    result = validate_limited(spec)
    assert result.returncode == 2
    assert result.stderr == f"{spec}:1: (spec): YAML aliases refer to themselves: not a cluster spec\n"
