"""The workspace: which files ship, their digest, the layers' tags, and the backends' rules about it."""

from __future__ import annotations

import os
import re
import tarfile
from pathlib import Path

import pytest

from helpers.workspaces import CONTENT_CREDENTIAL_FILES, CREDENTIAL_FILES, PLAIN_FILES
from launcher import api
from launcher.backends.workspace import layer_context, scan, shipped_files
from launcher.errors import LaunchError
from launcher.plan.dryrun import plan_document
from launcher.plan.workspace import CONTAINER_WORKSPACE, CredentialFile, plan_workspace, workspace_image
from launcher.spec.problems import SpecError


def make(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def shipped(root: Path) -> list[str]:
    return sorted(relative for relative, _ in shipped_files(root))


def paths(credentials: list[CredentialFile]) -> list[str]:
    return [credential.path for credential in credentials]


def test_vcs_venv_runs_and_caches_never_ship(tmp_path: Path) -> None:
    make(tmp_path, {"train.py": "", ".git/HEAD": "", ".venv/bin/python": "", "tfcluster-runs/x/ckpt": "",
                    "pkg/__pycache__/m.pyc": "", "pkg/m.py": "", "sub/.git": "gitdir: ../.git/worktrees/sub\n"})
    assert shipped(tmp_path) == ["pkg/m.py", "train.py"]  # sub/.git: a worktree's or submodule's pointer file


def test_credentials_never_ship_and_are_named_a_directory_once(tmp_path: Path) -> None:
    make(tmp_path, {name: "secret" for name in CREDENTIAL_FILES} | {"train.py": "", ".docker/daemon.json": "", "tls/ca.md": ""})
    source = scan(tmp_path)
    assert source.files == [".docker/daemon.json", "tls/ca.md", "train.py"]
    assert paths(source.withheld) == sorted([".aws/", ".azure/", ".config/gcloud/", ".docker/config.json", ".env", ".env.local",
                                             ".gcloud/", ".git-credentials", ".kube/", ".netrc", ".npmrc", ".pypirc", ".ssh/",
                                             "cert.p12", "conf/gcp-credentials-prod.json", "credentials.json", "id_ed25519", "id_rsa",
                                             "id_rsa.pub", "infra/terraform.tfstate.backup", "server.pem", "sub/.env",
                                             "terraform.tfstate", "tls/server.key"])
    assert source.withheld[0] == CredentialFile(path=".aws/", why="name matches **/.aws")
    assert source.reincluded == []


def test_a_bang_line_ships_a_credential_on_purpose_and_says_so(tmp_path: Path) -> None:
    make(tmp_path, {".env": "", ".env.example": "", ".aws/config": "", ".aws/credentials": "", "train.py": "",
                    ".dockerignore": "!.env.example\n!.aws/config\n"})
    source = scan(tmp_path)
    assert source.files == [".aws/config", ".dockerignore", ".env.example", "train.py"]
    assert paths(source.withheld) == [".aws/credentials", ".env"] and paths(source.reincluded) == [".aws/config", ".env.example"]


def test_credentials_by_content_never_ship_and_are_named_with_the_rule_that_matched(tmp_path: Path) -> None:
    make(tmp_path, CONTENT_CREDENTIAL_FILES | PLAIN_FILES)
    source = scan(tmp_path)
    assert source.files == sorted(PLAIN_FILES)
    assert paths(source.withheld) == sorted(CONTENT_CREDENTIAL_FILES) and source.reincluded == []
    assert CredentialFile(path="keys/prod", why="detect-secrets: Private Key") in source.withheld
    assert CredentialFile(path="deploy/ci.kubeconfig", why="a kubeconfig with a client key, token or password") in source.withheld
    assert source.size == sum(len(text.encode()) for text in PLAIN_FILES.values())


def test_a_bang_line_ships_a_credential_by_content_too_and_says_what_it_holds(tmp_path: Path) -> None:
    """As for names: the last line that decides a path is a ``!`` line, so it ships, named with its rule."""
    make(tmp_path, CONTENT_CREDENTIAL_FILES | {"train.py": "", ".dockerignore": "!keys/prod\n!vault\n"})
    source = scan(tmp_path)
    assert {"keys/prod", "vault/token", "vault/legacy-token"} <= set(source.files) and "keys/deploy" not in source.files
    assert source.reincluded == [CredentialFile(path="keys/prod", why="detect-secrets: Private Key"),
                                 CredentialFile(path="vault/legacy-token", why="a legacy Vault token"),
                                 CredentialFile(path="vault/token", why="a Vault token")]
    assert "keys/prod" not in paths(source.withheld) and "keys/deploy" in paths(source.withheld)


def test_a_bang_line_on_a_credential_by_name_names_what_it_holds(tmp_path: Path) -> None:
    make(tmp_path, {".env": CONTENT_CREDENTIAL_FILES["vault/token"], ".dockerignore": "!.env\n"})
    assert scan(tmp_path).reincluded == [CredentialFile(path=".env", why="a Vault token")]


def test_what_the_user_leaves_out_is_not_named_as_a_credential(tmp_path: Path) -> None:
    make(tmp_path, {"data/x.pem": "", ".env": "", "train.py": "", ".dockerignore": "data\n.env\n"})
    assert scan(tmp_path).withheld == []


def test_symbolic_links_never_pull_their_targets_in(tmp_path: Path) -> None:
    home = make(tmp_path / "home", {".ssh/id_rsa": "key", "notes.txt": "private"})
    root = make(tmp_path / "ws", {"train.py": "", "lib/m.py": ""})
    (root / "ssh").symlink_to(home / ".ssh", target_is_directory=True)
    (root / "notes.txt").symlink_to(home / "notes.txt")
    (root / "lib" / "up").symlink_to(tmp_path, target_is_directory=True)
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "same.py").symlink_to(root / "train.py")
    assert shipped(root) == ["lib/m.py", "train.py"]
    tag = workspace_image("c", "base", scan(root), None)
    with tarfile.open(fileobj=layer_context(tag, scan(root), None, print)) as tar:
        assert sorted(n for n in tar.getnames() if n.startswith("workspace/")) == ["workspace/lib/m.py", "workspace/train.py"]


def test_fifos_and_sockets_are_skipped_not_read(tmp_path: Path) -> None:
    import socket

    make(tmp_path, {"train.py": ""})
    os.mkfifo(tmp_path / "pipe")  # opening it would block forever
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        assert scan(tmp_path).files == ["train.py"]


def test_a_workspace_over_the_cap_is_one_line_naming_the_biggest_entries_unless_forced(tmp_path: Path) -> None:
    make(tmp_path, {"train.py": "x" * 10, "small.txt": "x" * 100, "data/a.bin": "x" * 3000, "data/b.bin": "x" * 3000,
                    "model.h5": "x" * 2000, ".git/objects/big": "x" * 10**5})
    with pytest.raises(SpecError) as error:
        scan(tmp_path, max_bytes=4096)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"workspace: {tmp_path} would ship 0.0 MiB, over the 0.0 MiB cap")
    assert "the biggest: 'data/' (0.0 MiB), 'model.h5' (0.0 MiB), 'small.txt' (0.0 MiB)" in message and "--force" in message
    assert scan(tmp_path, max_bytes=None).size == 8110
    assert scan(tmp_path, max_bytes=8110).size == 8110


def test_a_file_name_that_is_not_utf8_is_one_line_unless_it_is_left_out(tmp_path: Path) -> None:
    make(tmp_path, {"train.py": ""})
    (tmp_path / "data").mkdir()
    for name in (b"data/\xff.bin", b".env\xfe"):
        Path(os.fsdecode(bytes(tmp_path) + b"/" + name)).write_bytes(b"")
    with pytest.raises(SpecError) as error:
        scan(tmp_path)
    assert str(error.value) == (f"workspace: 'data/\\\\xff.bin': file names that are not UTF-8 would ship from {tmp_path}: "
                                "rename them or leave them out in .dockerignore")
    (tmp_path / ".dockerignore").write_text("data/*.bin\n")
    source = scan(tmp_path)
    assert source.files == [".dockerignore", "train.py"] and paths(source.withheld) == [".env\\xfe"]


def test_a_bad_dockerignore_is_one_line_per_problem_from_dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, {"train.py": "", ".dockerignore": "ok\n[oops\n"})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=r"^\.dockerignore:2: \(workspace\): pattern '\[oops': missing \]"):
        api.dry_run(spec_file(tmp_path, "."), "compose")


def test_dry_run_plans_list_every_file_that_ships_and_what_was_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, {"train.py": "", "lib/m.py": "", ".env": "", ".git/HEAD": ""})
    monkeypatch.chdir(tmp_path)
    workspace = plan_document(api.dry_run(spec_file(tmp_path, "."), "compose"))["workspace"]["source"]
    assert workspace["files"] == ["lib/m.py", "spec.yaml", "train.py"]
    assert workspace["withheld"] == [{"path": ".env", "why": "name matches **/.env*"}]
    assert api.dry_run(spec_file(tmp_path, "."), "local").plan.workspace.source.files == []  # type: ignore[union-attr]


def test_dockerignore_patterns_exceptions_and_double_star(tmp_path: Path) -> None:
    make(tmp_path, {".dockerignore": "# data stays home\ndata\n*.log\n**/*.tmp\n!keep.log\n/build\n",
                    "data/a.csv": "", "x.log": "", "keep.log": "", "src/deep/y.tmp": "", "build/out": "",
                    "src/build/kept.py": "", "train.py": ""})
    assert shipped(tmp_path) == [".dockerignore", "keep.log", "src/build/kept.py", "train.py"]


def test_a_double_star_slash_pattern_matches_at_the_top_too(tmp_path: Path) -> None:
    make(tmp_path, {".dockerignore": "**/node_modules\n**/*.pyc\n", "node_modules/a.js": "", "web/node_modules/b.js": "",
                    "top.pyc": "", "pkg/m.pyc": "", "pkg/m.py": ""})
    assert shipped(tmp_path) == [".dockerignore", "pkg/m.py"]


@pytest.mark.parametrize(("script", "shipped_too", "problem"), [
    ("train.py", True, None),
    ("missing.py", False, "missing.py: no such file in the workspace"),
    ("../outside.py", False, None),  # local tasks run it where it is
    ("../outside.py", True, "../outside.py: outside the workspace"),
    ("data/prep.py", True, "data/prep.py: left out of the workspace image (.dockerignore"),
    (".venv/tool.py", True, ".venv/tool.py: left out of the workspace image"),
    ("./train.py", True, None),
    ("link.py", True, "link.py: left out of the workspace image"),  # symbolic links do not ship
    ("keyed.py", True, "keyed.py: left out of the workspace image as a credential (detect-secrets: AWS Access Key): "
                       "a line !keyed.py in .dockerignore ships it"),
    ("keyed.py", False, None),  # local tasks run it where it is
])
def test_a_script_must_be_in_the_workspace_and_in_its_image(tmp_path: Path, script: str, shipped_too: bool,
                                                            problem: str | None) -> None:
    from launcher.backends.workspace import script_problem

    root = make(tmp_path / "ws", {"train.py": "", ".dockerignore": "data\n", "data/prep.py": "", ".venv/tool.py": "",
                                  "keyed.py": CONTENT_CREDENTIAL_FILES["aws_settings.py"]})
    make(tmp_path, {"outside.py": ""})
    (root / "link.py").symlink_to(root / "train.py")
    found = script_problem(root, script, shipped=shipped_too)
    assert found == problem if problem is None else found is not None and found.startswith(problem), found


def test_digest_follows_content_names_and_exec_bits_only(tmp_path: Path) -> None:
    root = make(tmp_path / "w", {"train.py": "print(1)\n", "lib/util.py": "X = 1\n"})
    first = scan(root)
    assert scan(root) == first and first.files == ["lib/util.py", "train.py"] and first.size == 15
    (root / "ignored.pyc").parent.joinpath(".git").mkdir()
    (root / ".git" / "index").write_text("changed")
    assert scan(root).digest == first.digest  # what does not ship does not count
    (root / "train.py").write_text("print(2)\n")
    changed = scan(root)
    assert changed.digest != first.digest
    (root / "train.py").chmod(0o755)
    assert scan(root).digest != changed.digest


def test_a_missing_workspace_is_a_launch_error(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="is not a directory"):
        scan(tmp_path / "nope")


def test_layer_tags_hold_the_digest_and_the_base_and_name_the_registry(tmp_path: Path) -> None:
    source = scan(make(tmp_path, {"train.py": ""}))
    cpu, gpu = (workspace_image("c", base, source, None) for base in ("tfcluster-worker:latest", "tfcluster-worker:latest-gpu"))
    assert cpu.tag.startswith("tfcluster-workspace-c:") and cpu.tag != gpu.tag and not cpu.push
    pushed = workspace_image("c", "tfcluster-worker:latest", source, "127.0.0.1:5000/team/")
    assert pushed.tag == f"127.0.0.1:5000/team/{cpu.tag}" and pushed.push
    assert plan_workspace("c", source, None, None).workdir == source.directory
    assert plan_workspace("c", source, ["b", "a", "b"], None).workdir == CONTAINER_WORKSPACE


def test_requirements_never_replace_the_images_tensorflow(tmp_path: Path) -> None:
    root = make(tmp_path, {"requirements.txt": "tabulate==0.9.0\ntensorflow==2.21.*\ntf-keras\nTensorBoard>=2\ntensorflow_datasets\n",
                           "train.py": ""})
    source = scan(root)
    said: list[str] = []
    context = layer_context(workspace_image("c", "base", source, None), source, None, said.append)
    with tarfile.open(fileobj=context) as tar:
        requirements = tar.extractfile("build/requirements.txt").read().decode().split()  # type: ignore[union-attr]
        names = tar.getnames()
        dockerfile = tar.extractfile("Dockerfile").read().decode()  # type: ignore[union-attr]
    assert requirements == ["tabulate==0.9.0", "tensorflow_datasets"]
    assert len(said) == 3
    assert {"workspace/train.py", "workspace/requirements.txt"} <= set(names)
    assert "FROM base AS requirements" in dockerfile and f"WORKDIR {CONTAINER_WORKSPACE}" in dockerfile


def test_the_layers_packages_are_found_whatever_the_images_python_version(tmp_path: Path) -> None:
    source = scan(make(tmp_path, {"requirements.txt": "tabulate\n"}))
    with tarfile.open(fileobj=layer_context(workspace_image("c", "base", source, None), source, None, print)) as tar:
        dockerfile = tar.extractfile("Dockerfile").read().decode()  # type: ignore[union-attr]
    assert ("ENV PYTHONPATH=/opt/workspace-packages/site-packages-1:/opt/workspace-packages/site-packages-2"
            "${PYTHONPATH:+:$PYTHONPATH}") in dockerfile and "PATH=/opt/workspace-packages/bin:$PATH" in dockerfile
    assert not re.search(r"python3\.\d", dockerfile) and "RUN set -e;" in dockerfile  # a failed install fails


def spec_file(tmp_path: Path, workspace: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: ws\nworkspace: {workspace}\nroles:\n  worker: {{replicas: 2, command: [python, train.py]}}\n")
    return path


def test_plans_run_tasks_in_the_workspace_on_every_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path / "code", {"train.py": ""})
    monkeypatch.chdir(tmp_path)
    spec = spec_file(tmp_path, "code")
    local = api.plan(spec, "local")
    assert local.workspace is not None and local.workspace.workdir == str(tmp_path / "code") and not local.workspace.images
    compose = api.plan(spec, "compose")
    assert compose.workspace is not None
    assert {t.image for t in compose.tasks} == {compose.workspace.images[0].tag}
    k8s = api.plan(spec, "k8s", overrides={"kubernetes": {"registry": "127.0.0.1:5000"}})
    assert {t.image for t in k8s.tasks} == {k8s.workspace.images[0].tag} and k8s.workspace.images[0].push  # type: ignore[union-attr]


def test_kubernetes_needs_a_registry_for_a_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, {"train.py": ""})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match="kubernetes.registry: a workspace image must be pushed"):
        api.plan(spec_file(tmp_path, "."), "k8s")


def test_the_text_dry_run_counts_what_ships_and_names_what_was_left_out_in_one_line(tmp_path: Path, cli,
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from launcher.cli.commands import main

    make(tmp_path, {"train.py": "x", ".aws/credentials": "", ".env": "", "new\nline.pem": "",
                    "keys/prod": CONTENT_CREDENTIAL_FILES["keys/prod"]})
    monkeypatch.chdir(tmp_path)
    result = cli.invoke(main, ["dry-run", str(spec_file(tmp_path, ".")), "-b", "compose"])
    assert result.exit_code == 0, result.output
    assert f"workspace: {tmp_path} (2 files ship, " in result.stdout
    [note] = [line for line in result.stdout.splitlines() if "left out as credentials" in line]
    assert note.endswith("'.aws/' (name matches **/.aws), '.env' (name matches **/.env*), "
                         "'keys/prod' (detect-secrets: Private Key), 'new\\nline.pem' (name matches **/*.pem)")  # no forged line
    assert "BEGIN" not in result.output  # the rule that matched, never the secret


def test_a_script_that_cannot_be_read_is_one_problem_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its content is read to tell whether it is a credential (as root, a mode of 0 reads anyway: the error is made)."""
    from launcher.backends import workspace
    from launcher.backends.workspace import script_problem

    root = make(tmp_path, {"train.py": ""})

    def unreadable(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(workspace, "detect", unreadable)
    assert script_problem(root, "train.py", shipped=True) == f"{root}/train.py: cannot read it: Permission denied"
    with pytest.raises(SpecError, match=r"^workspace: '.*/train.py': cannot read it: Permission denied$"):
        scan(root)
