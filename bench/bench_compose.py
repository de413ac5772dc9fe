"""Compose backend benchmark (not run in CI): python bench/bench_compose.py [--cold] [--runs N]

Prints one table of ratios against hand-written baselines measured in the same run:

- launch: ``ComposeBackend.submit`` of demo-sized MWMS (chief + 2 workers) until the
  chief's first training step, vs ``docker compose up -d`` of a hand-written compose
  file running the same image and the same training settings;
- image: build time cached (a launcher-only change); with ``--cold``, also the size
  and the build time without Docker's cache (downloads TensorFlow again: minutes)
  vs a hand-written one-stage Dockerfile that pip-installs the ``worker`` extra
  (tensorflow, tf-keras, tensorboard) and pydantic on the same base.

Recovery on compose is ``bench_recovery.py --backend compose``'s.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import docker

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from launcher import api  # noqa: E402
from launcher.api import validate_data  # noqa: E402
from launcher.backends.compose.backend import ComposeBackend, compose_command  # noqa: E402
from launcher.backends.image_build import build_image  # noqa: E402
from launcher.backends.interface import BackendOptions  # noqa: E402
from launcher.backends.lines import iter_lines  # noqa: E402
from launcher.protocol.events import EventReader  # noqa: E402

IMAGE = "tfcluster-worker:latest"
BASE_IMAGE = "tfcluster-base:bookworm"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
TRAINING = {"epochs": 50, "steps_per_epoch": 20, "batch_size_per_replica": 16,
            "args": {"train_examples": 512, "test_examples": 128}}

# The baseline a user would write by hand: three services, TF_CONFIG and the job settings inline.
HAND_WRITTEN = """
name: handmade
services:
{services}
networks:
  handmade: {{}}
volumes:
  handmade-ckpt: {{}}
"""
HAND_SERVICE = """  {host}:
    image: {image}
    hostname: {host}
    command: [python, -m, launcher.worker]
    user: "1000:1000"
    networks: [handmade]
    volumes: [handmade-ckpt:/checkpoints]
    environment:
      TF_USE_LEGACY_KERAS: "1"
      TF_CPP_MIN_LOG_LEVEL: "2"
      TFCLUSTER_TASK_NAME: {host}
      TFCLUSTER_EVENT_TOKEN: hand
      TFCLUSTER_JOB: '{job}'
      TF_CONFIG: '{tf_config}'
"""


# The image a user would write by hand: one stage, the worker extra from pip, no slimming.
HAND_DOCKERFILE = """
FROM {base}
COPY ca.crt /tmp/ca.crt
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends tini ca-certificates python3.11 python3.11-venv >/dev/null \\
    && rm -rf /var/lib/apt/lists/*
RUN python3.11 -m venv /opt/venv && PIP_CERT=/tmp/ca.crt /opt/venv/bin/pip install --no-cache-dir -q \\
    tensorflow==2.21.* tf-keras==2.21.* tensorboard==2.21.* "pydantic>=2.6,<3"
"""
HAND_IMAGE = "tfcluster-bench-handmade:latest"


def build_by_hand(client: docker.DockerClient, base: str, ca: Path) -> float:
    """Seconds to build HAND_DOCKERFILE without cache (its size is read from the engine afterwards)."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", HAND_DOCKERFILE.format(base=base).encode()), ("ca.crt", ca.read_bytes())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    start = time.time()
    client.images.build(fileobj=context, custom_context=True, tag=HAND_IMAGE, network_mode="host", nocache=True, rm=True)
    return time.time() - start


def first_step(client: docker.DockerClient, container: str, token: str, after: float = 0.0, timeout: float = 600) -> float:
    """Wall time when ``container`` logged its first training step event (of the run of ``token``) with time > ``after``."""
    reader = EventReader(token)
    ends = time.time() + timeout
    while time.time() < ends:
        try:
            stream = client.containers.get(container).logs(stream=True, follow=True)
        except docker.errors.NotFound:
            time.sleep(0.2)
            continue
        for line in iter_lines(stream):
            event = reader.parse(line)
            if event and event.event == "step" and event.time > after:
                return time.time()
        time.sleep(0.2)
    raise TimeoutError(f"{container}: no training step")


def spec(name: str) -> dict:
    return {"name": name, "roles": {"chief": {}, "worker": {"replicas": 2}}, "training": TRAINING,
            "env": {"TF_CPP_MIN_LOG_LEVEL": "2"}, "checkpoint": {"backup_every_steps": 5}}


def launch_tfcluster(client, backend: ComposeBackend, name: str) -> float:
    start = time.time()
    dry_run = api.dry_run(validate_data(spec(name)), "compose", api.new_run_id(), launching=True)
    backend.submit(dry_run)
    return first_step(client, f"{name}-chief-0", dry_run.plan.event_token) - start


def launch_by_hand(client, workdir: Path) -> float:
    cluster = {"chief": ["chief:2222"], "worker": ["worker0:2222", "worker1:2222"]}
    job = {"name": "handmade", "run_id": "hand", "strategy": "multi_worker_mirrored", "training": TRAINING,
           "checkpoint_dir": "/checkpoints", "backup_every_steps": 5}
    services = "".join(
        HAND_SERVICE.format(host=host, image=IMAGE, job=json.dumps(job),
                            tf_config=json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}))
        for host, kind, index in (("chief", "chief", 0), ("worker0", "worker", 0), ("worker1", "worker", 1))
    )
    (workdir / "docker-compose.yaml").write_text(HAND_WRITTEN.format(services=services))
    start = time.time()
    subprocess.run([*compose_command(), "up", "-d", "--quiet-pull"], cwd=workdir, check=True, capture_output=True)
    took = first_step(client, "handmade-chief-1", "hand") - start
    subprocess.run([*compose_command(), "down", "--volumes"], cwd=workdir, check=True, capture_output=True)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="also time a build without Docker's cache")
    parser.add_argument("--runs", type=int, default=2)
    options = parser.parse_args()
    client = docker.from_env()
    ca = CA_BUNDLE if CA_BUNDLE.is_file() else None
    base = BASE_IMAGE if client.images.list(name=BASE_IMAGE) else None
    rows = []

    def build(no_cache: bool) -> float:
        start = time.time()
        build_image(IMAGE, base_image=base, ca_bundle=ca, host_network=True, echo=lambda line: None, no_cache=no_cache)
        return time.time() - start

    if options.cold:
        cold = build(True)
        by_hand = build_by_hand(client, base or "python:3.11-slim-bookworm", ca or Path("/dev/null"))
        rows.append(("build, no cache (s)", cold, by_hand))
        rows.append(("image size (MB)", client.images.get(IMAGE).attrs["Size"] / 1e6, client.images.get(HAND_IMAGE).attrs["Size"] / 1e6))
        client.images.remove(HAND_IMAGE)
    build(False)
    marker = REPO / "launcher" / "_bench_marker.py"
    marker.write_text(f"# {time.time()}\n")  # a launcher-only change: only the small layers rebuild
    try:
        rows.append(("build, launcher changed (s)", build(False), None))
    finally:
        marker.unlink()

    backend = ComposeBackend.create(BackendOptions())
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(options.runs):
            theirs.append(launch_by_hand(client, Path(scratch)))
            name = f"bench-{run}"
            try:
                ours.append(launch_tfcluster(client, backend, name))
            finally:
                backend.cancel(name, volumes=True)
    launch, baseline = min(ours), min(theirs)
    rows.append(("up -> first step (s)", launch, baseline))

    print(f"{'measure':38} {'tfcluster':>10} {'baseline':>10} {'ratio':>7}")
    for label, value, reference in rows:
        ratio = f"{value / reference:7.2f}" if reference else f"{'':7}"
        shown = f"{reference:10.1f}" if reference else f"{'':10}"
        print(f"{label:38} {value:10.1f} {shown} {ratio}")
    print("baseline: docker compose up -d of a hand-written file (same image, same settings), time to first step;")
    print("          for the image rows, a hand-written one-stage Dockerfile installing the worker extra on the same base")


if __name__ == "__main__":
    main()
