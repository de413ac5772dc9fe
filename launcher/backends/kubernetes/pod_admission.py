"""Whether the API server admits a task's pod, asked before anything waits on it: a server-side dry run.

Contract: ``refusal(api, job, namespace)`` makes the pod of ``job`` (its template, named after the Job) as a dry run
(``dryRun=All``: validated and put through every admission plugin, stored nowhere) and answers None when it would be
admitted, else the API server's refusal in one line, e.g. ``403 Forbidden: pods "x" is forbidden: no PriorityClass
with name y was found`` (the Priority admission plugin): a pod the Job controller could never create, which would
leave a run pending in silence (the Job's ``FailedCreate`` events aside, which the launcher's Role does not read).
A launcher whose Role lacks ``create`` on pods (an older k8s/rbac-launcher.yaml) cannot ask: None. ``up`` refuses
a run so refused (``lasting``: not a quota exceeded now, which frees); ``status`` says it.
"""

from __future__ import annotations

from launcher.backends.kubernetes.kubeapi import Kind, KubeApi, Obj
from launcher.errors import LaunchError

#: What the RBAC authorizer says when the launcher may not create pods (no dry run either).
_NO_RIGHT = 'cannot create resource "pods"'
#: The ResourceQuota admission's refusal of a pod over what the quota has left now (it waits for room).
_QUOTA_NOW = "exceeded quota"


def pod_of(job: Obj) -> Obj:
    """The pod ``job``'s controller would create (without the controller's owner reference), named after the Job."""
    template = job["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": job["metadata"]["name"], "labels": dict(template.get("metadata", {}).get("labels", {})),
                         "annotations": dict(template.get("metadata", {}).get("annotations", {}))},
            "spec": template["spec"]}


def refusal(api: KubeApi, job: Obj, namespace: str) -> str | None:
    """See the module contract; other faults raise (``LaunchError``)."""
    try:
        with api.errors(f"admit the pod of Job {job['metadata']['name']} (a dry run)"):
            api.dry_run_create(Kind.POD, namespace, pod_of(job))
    except LaunchError as exc:
        text = str(exc)
        if " 403 " not in text and " 422 " not in text:
            raise
        return None if _NO_RIGHT in text else text.partition(": ")[2]
    return None


def lasting(refused: str) -> bool:
    """Whether a pod so refused stays refused until the spec or the cluster changes (not a quota exceeded now)."""
    return _QUOTA_NOW not in refused
