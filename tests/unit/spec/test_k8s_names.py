"""Every Kubernetes name and key of a spec is checked as Kubernetes checks it (``launcher.spec.k8s_names``): a bad one
is one line naming file, line and field, exit 2, before anything starts, and a name Kubernetes takes passes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli.commands import main
from launcher.spec import k8s_names

LONG = "a" * 64
SUBDOMAIN_254 = ".".join(["a" * 63] * 4)[:254]


def validate_k8s(tmp_path: Path, kubernetes: dict) -> tuple[int, list[str], Path]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "n", "roles": {"worker": {}}, "kubernetes": kubernetes}, sort_keys=False))
    result = CliRunner().invoke(main, ["validate", "-b", "k8s", str(spec)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr.splitlines(), spec


@pytest.mark.parametrize(
    ("kubernetes", "field", "says"),
    [
        ({"scheduler_name": "volcano\n"}, "kubernetes.scheduler_name", "qualified name"),
        ({"scheduler_name": "my scheduler"}, "kubernetes.scheduler_name", "qualified name"),
        ({"scheduler_name": f"x/{LONG}"}, "kubernetes.scheduler_name", "qualified name"),
        ({"image_pull_secrets": ["regcred\n"]}, "kubernetes.image_pull_secrets.0", "DNS-1123 subdomain"),
        ({"image_pull_secrets": ["ok", "Reg_Cred"]}, "kubernetes.image_pull_secrets.1", "DNS-1123 subdomain"),
        ({"image_pull_secrets": [SUBDOMAIN_254]}, "kubernetes.image_pull_secrets.0", "DNS-1123 subdomain"),
        ({"env_from_secrets": ["aws/creds"]}, "kubernetes.env_from_secrets.0", "DNS-1123 subdomain"),
        ({"env_from_secrets": ["-creds"]}, "kubernetes.env_from_secrets.0", "DNS-1123 subdomain"),
        ({"tolerations": [{"key": "gpu\n", "operator": "Exists"}]}, "kubernetes.tolerations.0.key", "qualified name"),
        ({"tolerations": [{"key": "a/b/c", "operator": "Exists"}]}, "kubernetes.tolerations.0.key", "qualified name"),
        ({"tolerations": [{"key": "gpu", "value": "a b"}]}, "kubernetes.tolerations.0.value", "label value"),
        ({"tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]}, "kubernetes.tolerations.0.value",
         "must be empty when operator is Exists"),
        ({"tolerations": [{"operator": "Equal", "value": "x"}]}, "kubernetes.tolerations.0.key",
         "is needed unless operator is Exists"),
        ({"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "toleration_seconds": 5}]},
         "kubernetes.tolerations.0.effect", "must be NoExecute when toleration_seconds is set"),
        ({"tolerations": [{"key": "gpu", "operator": "In"}]}, "kubernetes.tolerations.0.operator", "'Exists' or 'Equal'"),
        ({"tolerations": [{"key": "gpu", "effect": "NoSchedule\n"}]}, "kubernetes.tolerations.0.effect", "NoExecute"),
        ({"supervisor_placement": {"tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]}},
         "kubernetes.supervisor_placement.tolerations.0.value", "must be empty when operator is Exists"),
        ({"supervisor_placement": {"node_selector": {"pool": "a b"}}}, "kubernetes.supervisor_placement.node_selector.pool",
         "label value"),
        ({"node_selector": {"disk\n": "ssd"}}, 'kubernetes.node_selector."disk\\n"', "label key"),
        ({"node_selector": {"disk": "ssd\n"}}, "kubernetes.node_selector.disk", "label value"),
        ({"node_selector": {"disk": LONG}}, "kubernetes.node_selector.disk", "label value"),
        ({"labels": {"team": "ml\n"}}, "kubernetes.labels.team", "label value"),
        ({"pod_labels": {f"x.io/{LONG}": "a"}}, f'kubernetes.pod_labels."x.io/{LONG}"', "label key"),
        ({"pod_annotations": {"a b": "x"}}, 'kubernetes.pod_annotations."a b"', "annotation key"),
        ({"pod_annotations": {"big": "x" * (256 * 1024)}}, "kubernetes.pod_annotations", "256 KiB"),
        ({"namespace": "ml\n"}, "kubernetes.namespace", "DNS-1123 label"),
        ({"namespace": LONG}, "kubernetes.namespace", "DNS-1123 label"),
        ({"service_account": "runner\n"}, "kubernetes.service_account", "DNS-1123 subdomain"),
        ({"priority_class": "High"}, "kubernetes.priority_class", "DNS-1123 subdomain"),
        ({"priority_class": "team_high"}, "kubernetes.priority_class", "DNS-1123 subdomain"),
        ({"volume_claim": {"name": "Data"}}, "kubernetes.volume_claim.name", "DNS-1123 subdomain"),
        ({"volume_claim": {"storage_class": "fast\n"}}, "kubernetes.volume_claim.storage_class", "DNS-1123 subdomain"),
        ({"volumes": [{"name": "data\n", "emptyDir": {}}]}, "kubernetes.volumes.0.name", "DNS-1123 label"),
        ({"volumes": [{"name": "data", "emptyDir": {}}], "volume_mounts": [{"name": "data.x", "mount_path": "/d"}]},
         "kubernetes.volume_mounts.0.name", "DNS-1123 label"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_name_kubernetes_refuses_is_one_line_at_its_field(tmp_path: Path, kubernetes: dict, field: str,
                                                            says: str) -> None:
    code, lines, spec = validate_k8s(tmp_path, kubernetes)
    assert code == 2, lines
    [line] = lines
    assert line.startswith(f"{spec}:") and f": {field}: " in line and says in line, line


def test_names_kubernetes_takes_pass(tmp_path: Path) -> None:
    code, lines, _ = validate_k8s(tmp_path, {
        "namespace": "1team",  # a DNS-1123 label may start with a digit
        "scheduler_name": "scheduling.x-k8s.io/gang_scheduler",
        "image_pull_secrets": ["regcred", "reg.cred-2"],
        "env_from_secrets": ["a" * 63 + "." + "b" * 63],
        "service_account": "runner.v1",
        "priority_class": "team-high.v1",
        "tolerations": [{"operator": "Exists"}, {"key": "nvidia.com/gpu", "value": ""},
                        {"key": "spot", "operator": "Equal", "value": "True_1", "effect": "NoExecute",
                         "toleration_seconds": 30}],
        "node_selector": {"kubernetes.io/arch": "amd64", "pool": ""},
        "pod_annotations": {"Example.COM/Key": "any text\nat all"},
        "volume_claim": {"name": "data.v1", "storage_class": "fast-ssd"},
        "volumes": [{"name": "0data", "emptyDir": {}}],
        "volume_mounts": [{"name": "0data", "mount_path": "/data"}],
    })
    assert code == 0, lines


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (k8s_names.is_dns_label, ["a", "0", "a-b", "a" * 63], ["", "-a", "a-", "A", "a.b", "a" * 64, "a\n", "a_b"]),
        (k8s_names.is_dns_subdomain, ["a", "a.b", "a-b.c", SUBDOMAIN_254[:253]],
         ["", ".a", "a.", "a..b", "A", SUBDOMAIN_254, "a\n", "a/b"]),
        (k8s_names.is_qualified_name, ["a", "A_b.c", "x.io/Name", "a" * 63],
         ["", "/a", "a/", "a/b/c", "X.io/a", "a" * 64, "a\n", "-a", "a b"]),
        (k8s_names.is_label_value, ["", "a", "A-b_c.d", "a" * 63], ["-a", "a-", "a" * 64, "a\n", "a/b", "a b"]),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_each_rule_is_kubernetes_own(check, good: list[str], bad: list[str]) -> None:
    assert [name for name in good if not check(name)] == []
    assert [name for name in bad if check(name)] == []
