"""Safety property, on every backend: no credential, recognised by its name or by its content, ships.

One tree holds every credential issue 32 lists (a kubeconfig under another name, a service-account key, PEM and
OpenSSH keys without an extension, Vault tokens, ``.pgpass`` and ``.htpasswd`` lines, Docker ``auths``, an AWS
key in code) beside those the name list knows, and code and data that must ship. A backend that ships the
workspace (its tasks run in containers: an image layer) must leave every credential out of the layer it builds
(the build context's tar, what ``ensure_images`` sends the engine), and name each with the rule that matched,
never the secret; a backend whose tasks run in place ships nothing: no layer, no file listed to copy, the tasks
start in the directory itself. Every rendered file and every line ``dry-run`` prints is free of the secrets.
The real engine: ``tests/integration/test_run_compose.py::test_credentials_in_the_directory_never_reach_the_container_and_are_named_at_start``.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml

from helpers.workspaces import CONTENT_CREDENTIAL_FILES, NAMED_CREDENTIAL_FILES, PLAIN_FILES
from launcher import api
from launcher.backends import backend_class
from launcher.backends.workspace import layer_context
from launcher.cli.commands import main
from launcher.plan.targets import BackendKind

CREDENTIALS = NAMED_CREDENTIAL_FILES | CONTENT_CREDENTIAL_FILES
#: What must never be printed or shipped: every line of a credential long enough to be one.
SECRET_LINES = sorted({line.strip() for text in CREDENTIALS.values() for line in text.splitlines() if len(line.strip()) >= 20}
                      - {line.strip() for text in PLAIN_FILES.values() for line in text.splitlines()})


def tree(root: Path) -> Path:
    for name, text in (CREDENTIALS | PLAIN_FILES).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def spec(root: Path, kind: BackendKind) -> dict[str, object]:
    data: dict[str, object] = {"name": "creds", "workspace": str(root),
                               "roles": {"worker": {"replicas": 2, "command": ["python", "train.py"]}}}
    if kind is BackendKind.K8S:
        data["kubernetes"] = {"registry": "127.0.0.1:5000"}  # a workspace there is pushed: the spec must name where
    return data


def secrets_in(text: str) -> list[str]:
    return [line[:12] + "..." for line in SECRET_LINES if line in text]


@pytest.mark.parametrize("kind", list(BackendKind), ids=lambda kind: kind.value)
def test_no_credential_by_name_or_content_ships_and_none_is_printed(kind: BackendKind, tmp_path: Path, cli) -> None:
    root = tree(tmp_path / "project")
    dry_run = api.dry_run(api.validate_data(spec(root, kind), kind), kind, "r1")
    plan, workspace = dry_run.plan, dry_run.plan.workspace
    assert workspace is not None
    if backend_class(kind).target(plan.spec).runs_in_containers:  # ships: one layer per base image
        assert workspace.images
        for image in workspace.images:
            with tarfile.open(fileobj=layer_context(image, workspace.source, None, lambda line: None)) as tar:
                shipped = {member.name.removeprefix("workspace/"): tar.extractfile(member).read().decode(errors="replace")  # type: ignore[union-attr]
                           for member in tar.getmembers() if member.isfile() and member.name.startswith("workspace/")}
            assert sorted(shipped) == sorted(PLAIN_FILES)
            assert not secrets_in("\n".join(shipped.values()))
        withheld = {credential.path for credential in workspace.source.withheld}
        assert set(CONTENT_CREDENTIAL_FILES) <= withheld
        assert all(any(name == path or name.startswith(path) for path in withheld) for name in NAMED_CREDENTIAL_FILES)
    else:  # runs in place: nothing is copied anywhere
        assert workspace.images == [] and workspace.source.files == [] and workspace.source.withheld == []
        assert plan.workdir == str(root)
    assert not secrets_in(json.dumps(dry_run.files))

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec(root, kind)))
    for output in ("text", "plan"):
        result = cli.invoke(main, ["dry-run", str(spec_file), "-b", kind.value, "-o", output])
        assert result.exit_code == 0, result.output
        assert not secrets_in(result.output)
        if output == "text" and workspace.images:  # what was left out, each with the rule that matched
            assert "'keys/prod' (detect-secrets: Private Key)" in result.output
            assert "'db/pgpass' (PostgreSQL passwords, .pgpass lines)" in result.output
