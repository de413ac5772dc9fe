"""The worker image: its build context, its pins, and (with Docker) what the built image holds."""

from __future__ import annotations

import io
import os
import tarfile
import tomllib
from pathlib import Path

import pytest

from helpers.docker_engine import BASE_IMAGE, CA_BUNDLE, compose_cli, docker_engine, worker_image  # noqa: F401  (fixtures)
from helpers.paths import REPO  # noqa: I001
from launcher.backends.image_build import CA_IN_CONTEXT, DOCKERFILE, build_context


def names(context: io.BytesIO) -> list[str]:
    with tarfile.open(fileobj=context) as tar:
        return tar.getnames()


def test_context_holds_the_sources_and_the_ca_bundle_only_when_given(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    plain, with_ca = names(build_context()), names(build_context(ca))
    assert {DOCKERFILE, "pyproject.toml", "launcher/__init__.py", "launcher/worker/__main__.py"} <= set(plain)
    assert CA_IN_CONTEXT not in plain and CA_IN_CONTEXT in with_ca
    assert not [n for n in plain if "__pycache__" in n]


def test_context_is_reproducible() -> None:
    assert build_context().getvalue() == build_context().getvalue()


def pins(name: str) -> list[str]:
    """The requirement lines of ``worker_image/<name>``, following ``-r`` includes."""
    found: list[str] = []
    for line in (REPO / "worker_image" / name).read_text().splitlines():
        if line.startswith("-r "):
            found += pins(line.split()[1])
        elif line and not line.startswith("#"):
            found.append(line)
    return found


def test_image_requirements_match_the_worker_extra() -> None:
    """The image's set is the pip-only ``worker`` extra with tensorflow-cpu (CPU) or tensorflow[and-cuda] (GPU)."""
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["worker"]
    extra_tf = [p for p in extra if p.startswith("tensorflow==")]
    assert len(extra_tf) == 1
    version = extra_tf[0].removeprefix("tensorflow")  # "==2.21.*"
    shared = pins("requirements.txt")
    assert sorted(pins("requirements-cpu.txt")) == sorted([f"tensorflow-cpu{version}", *shared])
    assert sorted(pins("requirements-gpu.txt")) == sorted([f"tensorflow[and-cuda]{version}", *shared])
    assert pins("requirements-nodeps.txt") == [f"tf-keras{version}"]
    # The extra: the same TensorFlow line, tf-keras, and the image's packages on TensorFlow's version (tensorboard).
    assert sorted(extra) == sorted([f"tensorflow{version}", f"tf-keras{version}", *(p for p in shared if p.endswith(version))])


def run_in_image(engine, image: str, *command: str, **options) -> str:
    return engine.containers.run(image, list(command), remove=True, **options).decode()


@pytest.mark.docker
def test_image_runs_tasks_as_non_root_under_tini(docker_engine, worker_image: str) -> None:  # noqa: F811
    script = "import os; print(os.getuid(), open('/proc/1/cmdline').read().split(chr(0))[0])"
    uid, init = run_in_image(docker_engine, worker_image, "python", "-c", script).split()
    assert uid != "0"
    assert init.endswith("tini")


@pytest.mark.docker
def test_image_runs_tasks_with_tcmalloc_unless_the_spec_clears_the_preload(docker_engine, worker_image: str) -> None:  # noqa: F811
    script = "print(any('libtcmalloc_minimal' in line for line in open('/proc/self/maps')))"
    # stderr too: the dynamic loader says there when a preload cannot be found
    assert run_in_image(docker_engine, worker_image, "python", "-c", script, stderr=True).split() == ["True"]
    cleared = run_in_image(docker_engine, worker_image, "python", "-c", script, stderr=True,
                           environment={"LD_PRELOAD": ""})  # a spec's env: {LD_PRELOAD: ""}
    assert cleared.split() == ["False"]


@pytest.mark.docker
def test_image_has_the_worker_stack_but_not_the_controller_nor_the_build_ca(docker_engine, worker_image: str) -> None:  # noqa: F811
    script = (
        "import importlib.util as u, os, glob;"
        "print(*[bool(u.find_spec(m)) for m in ('tensorflow', 'tf_keras', 'pydantic', 'launcher.worker', 'click', 'docker')],"
        " bool(glob.glob('/tmp/build*')), os.stat('/checkpoints').st_uid)"
    )
    found = run_in_image(docker_engine, worker_image, "python", "-c", script).split()
    assert found == ["True", "True", "True", "True", "False", "False", "False", "1000"]


#: The CPU image's size budget (bytes, as ``docker image inspect`` reports it).
CPU_IMAGE_BUDGET = 1.3e9


@pytest.mark.docker
@pytest.mark.tf  # imports TensorFlow in the image
def test_cpu_image_is_within_budget_with_one_tensorflow_that_imports_as_the_task_user(docker_engine, worker_image: str) -> None:  # noqa: F811
    image = docker_engine.images.get(worker_image)
    assert image.attrs["Size"] <= CPU_IMAGE_BUDGET, f"{image.attrs['Size'] / 1e9:.2f} GB > {CPU_IMAGE_BUDGET / 1e9} GB"
    assert image.labels.get("org.tfcluster.variant") == "cpu"
    script = (
        "import importlib.metadata as m, os, tensorflow as tf, tf_keras, tensorboard;"
        "names = (d.metadata['Name'].lower().replace('_', '-') for d in m.distributions());"
        "dists = sorted(n for n in names if n in ('tensorflow', 'tensorflow-cpu'));"
        "print(os.getuid(), ','.join(dists), tf.__version__[:4], tf_keras.__version__[:4], tensorboard.__version__[:4],"
        " issubclass(tf.keras.Model, tf_keras.Model))"
    )
    found = run_in_image(docker_engine, worker_image, "python", "-c", script, user="1000", environment={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert found.split() == ["1000", "tensorflow-cpu", "2.21", "2.21", "2.21", "True"]


@pytest.mark.docker
@pytest.mark.tf
@pytest.mark.skipif(os.environ.get("TFCLUSTER_TEST_GPU_IMAGE") != "1",
                    reason="builds the multi-GB GPU variant; set TFCLUSTER_TEST_GPU_IMAGE=1 (no GPU here: checked on CPU only)")
def test_gpu_variant_builds_with_the_cuda_tensorflow(docker_engine) -> None:  # noqa: F811
    from launcher.backends.image_build import build_image
    from launcher.plan.images import ImageVariant

    base = BASE_IMAGE if docker_engine.images.list(name=BASE_IMAGE) else None
    image_id = build_image(variant=ImageVariant.GPU, base_image=base, ca_bundle=CA_BUNDLE if CA_BUNDLE.is_file() else None,
                           host_network=True, echo=lambda line: None)
    image = docker_engine.images.get(image_id)
    assert ImageVariant.GPU.default_tag in image.tags and image.labels.get("org.tfcluster.variant") == "gpu"
    script = ("import importlib.metadata as m;"
              "print(m.version('tensorflow')[:4], any(d.metadata['Name'].startswith('nvidia') for d in m.distributions()))")
    assert run_in_image(docker_engine, image_id, "python", "-c", script).split() == ["2.21", "True"]
