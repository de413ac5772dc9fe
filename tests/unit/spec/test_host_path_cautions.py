"""A hostPath volume is never mounted without a word: `validate`, `dry-run` (and `up`, which loads the spec the
same way) print one warning line naming file, line and field, a stronger one for a path that controls the node."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from helpers.paths import REPO
from launcher.cli.commands import main

TFJOB = REPO / "examples" / "tfjob.yaml"


def spec_with_host_path(tmp_path: Path, path: str) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "n", "roles": {"worker": {}}, "kubernetes": {
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "host", "hostPath": {"path": path}}],
        "volume_mounts": [{"name": "host", "mount_path": "/host", "read_only": True}],
    }}, sort_keys=False))
    return spec


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/", "hands every task the node's whole filesystem: control of the node"),
        ("//", "hands every task the node's whole filesystem"),
        ("/var/run/docker.sock", "the node's runtime sockets (the container runtime's: root on the node) (/var/run)"),
        ("/run/containerd/containerd.sock", "runtime sockets"),
        ("/proc", "the node's kernel and processes"),
        ("/etc/", "the node's configuration and credentials"),
        ("/root/.ssh", "root's home"),
        ("/var/lib/kubelet/pods", "the kubelet's credentials"),
        ("/var", "control of the node"),  # holds /var/run, /var/lib/kubelet, ...
        ("/data/imagenet", "hostPath /data/imagenet: every task reaches /data/imagenet of whichever node it lands on"),
    ],
)
@pytest.mark.parametrize("command", [["validate", "-b", "k8s"], ["dry-run", "-b", "k8s"]], ids=["validate", "dry-run"])
def test_a_host_path_is_a_warning_line_at_its_field(tmp_path: Path, path: str, says: str, command: list[str]) -> None:
    spec = spec_with_host_path(tmp_path, path)
    result = CliRunner().invoke(main, [*command, str(spec)])
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert line.startswith(f"warning: {spec}:10: kubernetes.volumes.1.hostPath.path: ") and says in line, line
    assert "restricted pod security profile refuses any hostPath" in line


def test_a_spec_without_host_path_has_no_warning(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: n\nroles: {worker: {}}\nkubernetes:\n  volumes: [{name: d, nfs: {server: nas, path: /}}]\n")
    result = CliRunner().invoke(main, ["validate", "-b", "k8s", str(spec)])
    assert result.exit_code == 0 and result.stderr == "", result.output


def test_a_tfjob_host_path_warning_names_the_tfjob_field(tmp_path: Path) -> None:
    data = yaml.safe_load(TFJOB.read_text())
    for replica in data["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["volumes"] = [{"name": "sock", "hostPath": {"path": "/var/run/docker.sock"}}]
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(main, ["validate", "-b", "k8s", str(job)])
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if "hostPath" in line]
    assert line.startswith(f"warning: {job}:") and \
        ": spec.tfReplicaSpecs.Chief.template.spec.volumes.0.hostPath.path: hostPath /var/run/docker.sock" in line, line
