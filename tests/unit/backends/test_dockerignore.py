"""``.dockerignore`` semantics against Docker's (moby's ``patternmatcher`` and ``ignorefile``), and bounded time."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.backends.dockerignore import PatternMatcher, make_pattern, read_patterns
from launcher.spec.problems import SpecError


def excluded(patterns: list[str], path: str) -> bool:
    """Whether Docker leaves ``path`` out: each parent directory matched first, as a walk of the context does."""
    matcher = PatternMatcher([make_pattern(p, "test") for p in patterns])
    parts = path.split("/")
    matches = None
    for depth in range(1, len(parts) + 1):
        matches = matcher.matches("/".join(parts[:depth]), matches)
    decider = matcher.decider(matches)  # type: ignore[arg-type]
    return decider is not None and not decider.exception


# (pattern, path, Docker leaves it out): cases of moby's own patternmatcher tests (MatchesOrParentMatches).
MOBY_CASES = [
    ("**", "file", True), ("**", "dir/file", True), ("**/", "dir/file", True), ("**/**", "dir/file", True),
    ("dir/**", "dir/file", True), ("dir/**", "dir/dir2/file", True), ("**/dir", "dir", True), ("**/dir", "dir/file", True),
    ("**/dir2/*", "dir/dir2/file", True), ("**/dir2/**", "dir/dir2/dir3/file", True),
    ("**file", "file", True), ("**file", "dir/file", True), ("**/file", "dir/dir/file", True),
    ("**/file*", "dir/dir/file.txt", True), ("**/file*txt", "dir/dir/file.txt", True), ("**/file*.txt*", "dir/dir/file.txt", True),
    ("**/**/*.txt", "dir/dir/file.txt", True), ("**/**/*.txt2", "dir/dir/file.txt", False), ("**/*.txt", "file.txt", True),
    ("a**/*.txt", "a/file.txt", True), ("a**/*.txt", "a/dir/dir/file.txt", True), ("a/*.txt", "a/dir/file.txt", False),
    ("a/*.txt", "a/file.txt", True), ("a/*.txt**", "a/file.txt", True),
    ("a[b-d]e", "ae", False), ("a[b-d]e", "ace", True), ("a[b-d]e", "aae", False), ("a[^b-d]e", "aze", True),
    (".*", ".foo", True), (".*", "foo", False), ("abc.def", "abcdef", False), ("abc.def", "abc.def", True),
    ("abc?def", "abcZdef", True), ("abc?def", "abcdef", False), ("**/foo/bar", "foo/bar", True), ("**/foo/bar", "dir/dir2/foo/bar", True),
    ("abc/**", "abc", False), ("abc/**", "abc/def/ghi", True), ("**/.foo", ".foo", True), ("**/.foo", "bar.foo", False),
    ("a(b)c/def", "a(b)c/def", True), ("a.|)$(}+{bc", "a.|)$(}+{bc", True),
    ("dist/*.whl", "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl", True),
    ("a\\\\", "a\\", True), ("a\\*b", "a*b", True), ("a\\*b", "ab", False),
    ("*", "abc", True), ("*c", "abc", True), ("a*/b", "abc/b", True), ("a*/b", "a/c/b", False),
    ("a*b*c*d*e*/f", "axbxcxdxexxx/f", True), ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", False), ("a*b?c*x", "abxbbxdbxebxczzx", True),
    ("a*b?c*x", "abxbbxdbxebxczzy", False), ("ab[^c]", "abc", False), ("ab[^e-g]", "abc", True),
    ("a?b", "a☺b", True), ("a[^a]b", "a☺b", True), ("a???b", "a☺b", False), ("[a-ζ]*", "α", True), ("*[a-ζ]", "A", False),
    ("a?b", "a/b", False), ("a*b", "a/b", False), ("[\\]a]", "]", True), ("[x\\-]", "-", True), ("[x\\-]", "z", False),
    ("*x", "xxx", True),
    # where the Docker SDK's matcher (docker.utils.build) differs from Docker
    ("Data", "data", False), ("*.PEM", "key.pem", False), ("[!a]b", "cb", False), ("**.py", "x.py", True),
    # Docker's cleaning: trailing and leading slashes, . and .. elements; . is ignored
    ("/build/", "build/out", True), ("docs/../build", "build", True), (".", "x", False), ("./x", "x", True),
    # on purpose unlike Docker, whose ** stops at a newline
    ("**/.env*", "new\nline/.env", True), ("a/**/b", "a/x\ny/b", True),
]


@pytest.mark.parametrize(("pattern", "path", "left_out"), MOBY_CASES)
def test_a_pattern_matches_as_in_docker(pattern: str, path: str, left_out: bool) -> None:
    assert excluded([pattern], path) is left_out


@pytest.mark.parametrize(("patterns", "path", "left_out"), [
    (["**", "!util/docker/web"], "util/docker/web/foo", False),
    (["**", "!util/docker/web", "util/docker/web/foo"], "util/docker/web/foo", True),
    (["**", "!dist/*.whl"], "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl", False),
    (["!fileutils.go", "*.go"], "fileutils.go", True),  # the last match decides
    (["*.go", "!fileutils.go"], "fileutils.go", False),
    (["docs", "!docs/README.md"], "docs/README.md", False),
    (["docs/*", "!docs/README.md"], "docs/README.md", False),
])
def test_the_last_matching_pattern_decides(patterns: list[str], path: str, left_out: bool) -> None:
    assert excluded(patterns, path) is left_out


@pytest.mark.parametrize("pattern", ["[", "a[", "[^bc", "\\", "!", "x\\"])
def test_a_pattern_docker_refuses_is_one_located_line(tmp_path: Path, pattern: str) -> None:
    (tmp_path / ".dockerignore").write_text(f"# fine\nok\n{pattern}\n")
    with pytest.raises(SpecError) as error:
        read_patterns(tmp_path / ".dockerignore", ".dockerignore")
    assert str(error.value).startswith(".dockerignore:3: ") and "\n" not in str(error.value)


def test_the_file_is_read_as_dockers_cli_reads_it(tmp_path: Path) -> None:
    (tmp_path / ".dockerignore").write_bytes(b"\xef\xbb\xbf# comment\n  spaced  \n !  data/ \n\n #not a comment\r\n")
    patterns = read_patterns(tmp_path / ".dockerignore", ".dockerignore")
    assert [(r.text, r.exception, r.origin) for r in patterns] == [
        ("spaced", False, ".dockerignore:2"), ("data", True, ".dockerignore:3"), ("#not a comment", False, ".dockerignore:5")]


def test_a_line_that_is_not_utf8_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / ".dockerignore").write_bytes(b"ok\n\xff\xfe*.bin\nalso\n\xc3\n")
    with pytest.raises(SpecError) as error:
        read_patterns(tmp_path / ".dockerignore", ".dockerignore")
    assert str(error.value).splitlines() == [".dockerignore:2: (workspace): not UTF-8 (Docker reads .dockerignore as UTF-8)",
                                             ".dockerignore:4: (workspace): not UTF-8 (Docker reads .dockerignore as UTF-8)"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pattern", ["*a" * 40 + "b", "**/" * 200 + "x", "a**" * 100 + "b", "[a-z]*" * 50 + "!"])
def test_patterns_that_backtrack_in_a_backtracking_engine_match_in_linear_time(pattern: str) -> None:
    """Each of these takes a backtracking engine (Python's ``re``, the Docker SDK's matcher) years on the paths below."""
    paths = ["a" * 255, "/".join(["a"] * 2000), "a" * 4000 + "c"]
    for path in paths:
        assert not excluded([pattern], path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "dir", "dangling"])
def test_a_dockerignore_that_is_no_regular_file_is_one_line_not_a_hang(tmp_path: Path, kind: str) -> None:
    import os

    ignore = tmp_path / ".dockerignore"
    {"fifo": os.mkfifo, "dir": os.mkdir, "dangling": lambda p: p.symlink_to(tmp_path / "nowhere")}[kind](ignore)
    with pytest.raises(SpecError, match=r"^\.dockerignore: \(workspace\): not a regular file$"):
        read_patterns(ignore, ".dockerignore")
