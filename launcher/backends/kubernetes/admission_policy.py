"""The admission policy that holds a run's in-cluster supervisor to its own run. Pure, but for ``unguarded``.

RBAC cannot narrow the supervisor's Role to "this run's objects": Kubernetes cannot limit ``create`` to names,
and pods are named by their Jobs, so the Role grants Jobs ``create`` and pods ``get``/``list``/``delete`` in
the whole namespace (``supervisor_objects.role_rules``). The answer is two ValidatingAdmissionPolicies
(admissionregistration.k8s.io/v1, Kubernetes 1.30 or later), ``POLICY`` on the Jobs it creates or changes and
``DELETIONS`` on the Jobs and pods it deletes (apart, so that each type-checks against the kinds it matches), each
with a binding of its name: generic, for every run in every namespace, cluster-scoped, so an administrator
applies them once (``document``,
the file ``FILE``, ``admin_files``: ``render`` writes it beside the manifests, not in their kustomization, and
``up`` never applies it; k8s/admission-policy.yaml is the same). It matches requests made by a ServiceAccount named
``<run>-supervisor`` (``naming.supervisor_name``) and reads, in the request's namespace, every ConfigMap
labelled ``LABEL_PARAMS`` (``params``: one per run, which ``up`` creates with the run; the supervisor's Role
cannot write it). Held to the params of its own run (``cluster`` = the run's name, taken from its account's
name), the supervisor may create or change only Jobs that carry ``tfcluster.io/cluster=<run>`` (their pod
template too), whose containers run the run's images (``images``) as the run's ServiceAccount
(``serviceAccount``), with no hostPath volume, no host network, PID or IPC namespace, no host port, no
privileged container, privilege escalation off and no added capability; and it may delete only Jobs and pods
that carry its run's label. The params of another run are nothing to check. What it does not cover: a
supervisor whose run has no params in its namespace (a run launched before them, or its params deleted by
someone with the rights to delete ConfigMaps there) is held to nothing, and the policy does not look at
which Secrets, ConfigMaps or claims a Job's pods mount, or at their command (docs/security.md).

``unguarded(api, namespace)`` tells ``up`` when the namespace is known to have neither the binding nor the
``restricted`` Pod Security Standard enforced: read-only, and silent (False) when it may not read them.
"""

from __future__ import annotations

from typing import Any

import yaml

from launcher.backends.kubernetes.kubeapi import ClusterKind, KubeApi
from launcher.backends.kubernetes.pods import meta, task_account
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.planner import Plan

Manifest = dict[str, Any]

#: The ValidatingAdmissionPolicy on the Jobs a supervisor creates or changes, and its binding.
POLICY = "tfcluster-supervisor"
#: The one on the Jobs and pods a supervisor deletes (apart: its expressions type-check against both kinds).
DELETIONS = f"{POLICY}-deletions"
#: The rendered file holding them (not in kustomization.yaml: an administrator applies it, ``kubectl apply -f``).
FILE = "admission-policy.yaml"
#: The label of a run's params ConfigMap, by which the bindings find it (``naming.LABEL_MANAGED`` too).
LABEL_PARAMS = "tfcluster.io/policy"
#: The keys of a run's params: the run's name, its images and its tasks' ServiceAccount.
CLUSTER_KEY, IMAGES_KEY, ACCOUNT_KEY = "cluster", "images", "serviceAccount"
#: What the images are joined with (an image reference holds no space).
IMAGE_SEPARATOR = " "
#: The label of the Pod Security Standard a namespace enforces, and the level that also forbids what the policy does.
PSS_ENFORCE, PSS_RESTRICTED = "pod-security.kubernetes.io/enforce", "restricted"

_SUFFIX = naming.supervisor_name("")  # "-supervisor"


def _labelled(obj: str) -> str:
    """CEL: ``obj``'s metadata carries ``tfcluster.io/cluster=<the supervisor's run>``."""
    label = naming.LABEL_CLUSTER
    return f"has({obj}.labels) && '{label}' in {obj}.labels && {obj}.labels['{label}'] == variables.run"


def _flag_off(field: str) -> str:
    return f"!(has({field}) && {field})"


#: (CEL check, message) of each rule on a Job created or changed (``POLICY``).
RULES: list[tuple[str, str]] = [
    (f"{_labelled('object.metadata')} && {_labelled('variables.pod.metadata')}",
     f"a tfcluster supervisor may create or change only Jobs of its own run ({naming.LABEL_CLUSTER} on the Job and "
     "its pod template)"),
    ("variables.containers.all(c, c.image in variables.images)",
     "a tfcluster supervisor may run only its run's images"),
    (f"has(variables.pod.spec.serviceAccountName) && variables.pod.spec.serviceAccountName == "
     f"params.data.{ACCOUNT_KEY} && (!has(variables.pod.spec.serviceAccount) || variables.pod.spec.serviceAccount == "
     f"params.data.{ACCOUNT_KEY})",
     "a tfcluster supervisor may run pods only as its run's ServiceAccount"),
    ("!has(variables.pod.spec.volumes) || variables.pod.spec.volumes.all(v, !has(v.hostPath))",
     "a tfcluster supervisor may not mount a hostPath volume"),
    (" && ".join(_flag_off(f"variables.pod.spec.{host}") for host in ("hostNetwork", "hostPID", "hostIPC")),
     "a tfcluster supervisor may not use the node's network, PID or IPC namespace"),
    ("variables.containers.all(c, has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation) "
     "&& !c.securityContext.allowPrivilegeEscalation && " + _flag_off("c.securityContext.privileged") + " && "
     "(!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || "
     "size(c.securityContext.capabilities.add) == 0) && (!has(c.ports) || c.ports.all(p, !has(p.hostPort) || "
     "p.hostPort == 0)))",
     "a tfcluster supervisor may not run a privileged container, allow privilege escalation, add capabilities "
     "or use a host port"),
]
#: The rule on a Job or pod deleted (``DELETIONS``).
DELETION_RULE = (_labelled("oldObject.metadata"),
                 f"a tfcluster supervisor may delete only Jobs and pods of its own run ({naming.LABEL_CLUSTER})")


def _policy(name: str, resource_rules: list[Manifest], variables: list[Manifest],
            rules: list[tuple[str, str]]) -> Manifest:
    """A policy on the requests of a ``<run>-supervisor`` ServiceAccount: each of ``rules`` holds with the params of
    its own run (``variables.run``; another run's params: nothing to check)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {naming.LABEL_MANAGED: naming.MANAGER}},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": resource_rules},
            "matchConditions": [{
                "name": "tfcluster-supervisor",
                "expression": f"request.userInfo.username.matches('^system:serviceaccount:[^:]+:[^:]+{_SUFFIX}$')",
            }],
            "variables": [
                {"name": "account", "expression": "request.userInfo.username.split(':')[3]"},
                {"name": "run", "expression": f"variables.account.substring(0, size(variables.account) - {len(_SUFFIX)})"},
                {"name": "mine", "expression": f"params.data.{CLUSTER_KEY} == variables.run"},
                *variables,
            ],
            "validations": [{"expression": f"!variables.mine || ({check})", "message": message}
                            for check, message in rules],
        },
    }


def policies() -> list[Manifest]:
    """``POLICY`` and ``DELETIONS`` (see the module's contract)."""
    jobs = {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]}
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    job_variables = [
        {"name": "pod", "expression": "object.spec.template"},
        {"name": "containers", "expression": "variables.pod.spec.containers + "
         "(has(variables.pod.spec.initContainers) ? variables.pod.spec.initContainers : [])"},
        {"name": "images", "expression": f"params.data.{IMAGES_KEY}.split('{IMAGE_SEPARATOR}')"},
    ]
    return [_policy(POLICY, [{**jobs, "operations": ["CREATE", "UPDATE"]}], job_variables, RULES),
            _policy(DELETIONS, [{**jobs, "operations": ["DELETE"]}, {**pods, "operations": ["DELETE"]}], [],
                    [DELETION_RULE])]


def binding(policy: str) -> Manifest:
    """The binding of ``policy``: every namespace, the params of the request's namespace (none there: nothing to
    check)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy, "labels": {naming.LABEL_MANAGED: naming.MANAGER}},
        "spec": {
            "policyName": policy,
            "validationActions": ["Deny"],
            "paramRef": {"selector": {"matchLabels": _params_labels()}, "parameterNotFoundAction": "Allow"},
        },
    }


def _params_labels() -> dict[str, str]:
    return {naming.LABEL_MANAGED: naming.MANAGER, LABEL_PARAMS: POLICY}


HEADER = ("# tfcluster's admission policies for the runs' in-cluster supervisors (launcher/backends/kubernetes/"
          "admission_policy.py),\n# the same for every run: a cluster administrator applies it once, "
          f"`kubectl apply -f {FILE}` (docs/security.md).\n# Not in kustomization.yaml: `up` never applies it.\n")


def document() -> str:
    """``FILE``'s text: the policies, each followed by its binding."""
    docs = [doc for policy in policies() for doc in (policy, binding(policy["metadata"]["name"]))]
    return HEADER + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=120)


def admin_files(plan: Plan) -> dict[str, str]:
    """``FILE`` for a run with an in-cluster supervisor (``DryRun.admin_files``), else nothing."""
    return {FILE: document()} if plan.spec.kubernetes.supervisor else {}


def params(plan: Plan) -> list[Manifest]:
    """The run's params ConfigMap (``naming.admission_params_name``), none without an in-cluster supervisor."""
    if not plan.spec.kubernetes.supervisor:
        return []
    metadata = meta(plan, naming.admission_params_name(plan.name))
    metadata["labels"].update(_params_labels())
    images = sorted({task.image for task in plan.tasks})
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
             "data": {CLUSTER_KEY: plan.name, IMAGES_KEY: IMAGE_SEPARATOR.join(images),
                      ACCOUNT_KEY: task_account(plan)}}]


def unguarded(api: KubeApi, namespace: str) -> bool:
    """True when ``namespace`` is known to have neither ``POLICY``'s binding (``DELETIONS``' is applied with it) nor the ``restricted`` Pod Security
    Standard enforced (its label ``PSS_ENFORCE``), which also forbids a pod hostPath volumes, host namespaces and
    privilege; False when it has either, or when either cannot be read: a namespace's Role reads neither
    (403), and this look never fails a launch."""
    try:
        with api.errors(f"read Namespace {namespace}"):
            found = api.read_cluster_scoped_if_exists(ClusterKind.NAMESPACE, namespace)
        if found is None or found["metadata"].get("labels", {}).get(PSS_ENFORCE) == PSS_RESTRICTED:
            return False
        with api.errors(f"read ValidatingAdmissionPolicyBinding {POLICY}"):
            return api.read_cluster_scoped_if_exists(ClusterKind.POLICY_BINDING, POLICY) is None
    except LaunchError:
        return False


def unguarded_note(namespace: str) -> str:
    """``up``'s one line for an ``unguarded`` namespace."""
    return (f"warning: namespace {namespace} has neither tfcluster's admission policy nor the restricted Pod Security "
            f"Standard: the run's supervisor can create any Job there (privileged, hostPath) and delete any pod; ask a "
            f"cluster admin to apply {FILE} (`tfcluster render -b k8s`, k8s/{FILE}; docs/security.md)")
