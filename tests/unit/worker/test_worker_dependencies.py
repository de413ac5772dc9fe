"""The task side imports nothing the worker image lacks: the image installs TensorFlow, tf-keras, TensorBoard,
pydantic and py-spy (worker_image/requirements*.txt), and tfcluster itself without its dependencies.

The modules of tfcluster a task imports before TensorFlow (``launcher.spec`` and ``launcher.protocol``, which
the worker and ``launcher.progress`` import) are imported here in a fresh interpreter where every
controller-only package is made unimportable; a module-level import of one (RE2 in the spec's models once
stopped every compose task with ``ModuleNotFoundError: No module named 're2'``) fails this test.
"""

from __future__ import annotations

import subprocess
import sys

from helpers.paths import REPO

#: Import names of the controller's dependencies (pyproject's ``dependencies``) the worker image does not install.
#: (``rich`` is not among them: Keras imports it, so the image has it.)
CONTROLLER_ONLY = ("click", "yaml", "docker", "kubernetes", "re2", "setproctitle", "detect_secrets")
#: What a task imports of tfcluster before TensorFlow.
TASK_SIDE = ("launcher.spec.models", "launcher.protocol.runconfig", "launcher.protocol.events",
             "launcher.protocol.env", "launcher.protocol.checkpoint_layout")


def test_the_task_side_imports_no_controller_only_package() -> None:
    code = (f"import sys\nfor name in {CONTROLLER_ONLY!r}:\n    sys.modules[name] = None\n"
            f"import importlib\nfor module in {TASK_SIDE!r}:\n    importlib.import_module(module)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_in_cluster_supervisor_imports_nothing_its_image_lacks() -> None:
    """The supervisor pod runs the worker image, which adds worker_image/requirements-supervisor.txt: every other
    controller-only package made unimportable, its program (``launcher.backends.supervisor_process.main``) still
    imports and resolves the Kubernetes backend's class and the state it supervises, as ``k8s NAMESPACE/NAME`` does."""
    added = [line.split(">")[0].split("=")[0].strip() for line in
             (REPO / "worker_image" / "requirements-supervisor.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    imports = {"PyYAML": "yaml", "google-re2": "re2"}
    lacking = [name for name in CONTROLLER_ONLY if name not in {imports.get(p, p) for p in added}]
    assert lacking and "kubernetes" not in lacking
    code = (f"import sys\nfor name in {lacking!r}:\n    sys.modules[name] = None\n"
            "import launcher.backends.kubernetes.cluster_state, launcher.backends.kubernetes.runtime\n"
            "from launcher.backends.supervisor_process import main\n"
            "cls = main.backend_class(main.BackendKind.K8S)\n"
            "cls.host, cls.state_of\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_supervisor_requirements_are_the_packages_own() -> None:
    """Each line of requirements-supervisor.txt is one of pyproject's dependencies, as written there."""
    import tomllib

    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = [line.strip() for line in (REPO / "worker_image" / "requirements-supervisor.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines and set(lines) <= set(dependencies)
