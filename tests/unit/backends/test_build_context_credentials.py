"""``tfcluster build`` packs ``launcher/``, ``worker_image/``, ``pyproject.toml`` and ``README.md``: a file among
them that is a credential (by name, a directory above included, or by content: the detector the workspace layer
uses) refuses the build, naming the file and why, never the secret; a clean tree packs as before."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from helpers.workspaces import CONTENT_CREDENTIAL_FILES
from launcher.backends.image_build import DOCKERFILE, build_context
from launcher.errors import ImageBuildError


def _checkout(root: Path) -> Path:
    (root / "worker_image").mkdir(parents=True)
    (root / DOCKERFILE).write_text("FROM scratch\n")
    (root / "launcher").mkdir()
    (root / "launcher" / "__init__.py").write_text('"""tfcluster."""\n')
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return root


def test_a_clean_checkout_packs_its_files(tmp_path: Path) -> None:
    with tarfile.open(fileobj=build_context(root=_checkout(tmp_path))) as tar:
        assert sorted(tar.getnames()) == sorted([DOCKERFILE, "launcher/__init__.py", "pyproject.toml"])


@pytest.mark.parametrize(("relative", "why"), [
    ("launcher/id_rsa", "name matches **/id_rsa*"),
    ("worker_image/.ssh/config", "name matches **/.ssh"),
    ("launcher/.env", "name matches **/.env*"),
])
def test_a_credential_by_name_refuses_the_build(tmp_path: Path, relative: str, why: str) -> None:
    root = _checkout(tmp_path)
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text("whatever\n")
    with pytest.raises(ImageBuildError) as info:
        build_context(root=root)
    assert f"{relative} ({why})" in str(info.value) and "\n" not in str(info.value)


def test_a_credential_by_content_refuses_the_build_without_showing_it(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    name, content = next(iter(CONTENT_CREDENTIAL_FILES.items()))
    (root / "launcher" / "settings.py").write_text(content)
    with pytest.raises(ImageBuildError) as info:
        build_context(root=root)
    message = str(info.value)
    assert "launcher/settings.py (" in message, message
    assert not any(line.strip() and line.strip() in message for line in content.splitlines() if len(line) > 12)
