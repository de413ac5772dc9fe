"""All-or-nothing placement of a run's task pods (``kubernetes.gang``): the one home of the gang.

Contract: with ``kubernetes.gang`` ``auto`` or ``on`` the run's manifests hold one ``scheduling.k8s.io/v1beta1``
``PodGroup`` (``pod_group``: named ``naming.pod_group_name``, the run's labels, a gang policy whose ``minCount`` is
the number of task pods, the ``priorityClassName`` the task pods carry, if they carry one) and every task pod joins
it (``join``: ``spec.schedulingGroup.podGroupName``); the supervisor pod and TensorBoard never do. Kubernetes'
scheduler (1.37, gate ``GenericWorkload``) then binds none of the task pods until it can bind them all: two runs
that each need 3 pods where 4 fit never hold 2 each. ``render`` and ``dry-run`` never ask a cluster: they write
the gang unless the spec says ``off``. ``fit`` is what ``up`` applies: it asks the cluster once (API discovery of
``podgroups``); where they are not served, ``auto`` plans the run again without the gang and says so in one line
(``not_all_or_nothing``), and ``on`` refuses in one line, before anything is created (the API server would drop
the pods' ``schedulingGroup`` silently). ``GangSize`` keeps the group's ``minCount`` true while the run's
supervisor restarts tasks (``runtime``): the scheduler counts only pods that have not ended, so a task that ended
for good (a worker done before the chief, a failure rule's ``continue``) would leave a later restart's pods waiting
for it forever; the group's ``minCount`` follows the tasks still meant to run. Pure but ``fit`` and ``GangSize``,
which get the ``KubeApi``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from launcher.backends.kubernetes.kubeapi import KubeApi
from launcher.backends.kubernetes.pods import Manifest, meta
from launcher.errors import LaunchError
from launcher.plan import naming
from launcher.plan.dryrun import DryRun
from launcher.plan.planner import Plan
from launcher.spec.models import GangPlacement

API_VERSION = "scheduling.k8s.io/v1beta1"
KIND = "PodGroup"
#: What a cluster needs to serve PodGroups (Kubernetes 1.37: the gate is beta, off by default, and so is the API).
ENABLE = ("GenericWorkload=true in --feature-gates of kube-apiserver, kube-scheduler and kube-controller-manager, "
          "and --runtime-config=scheduling.k8s.io/v1beta1=true on kube-apiserver")

log = logging.getLogger(__name__)


def wanted(plan: Plan) -> bool:
    """Whether the run's task pods are rendered as one gang."""
    return plan.spec.kubernetes.gang is not GangPlacement.OFF


def join(plan: Plan, pod: Manifest) -> Manifest:
    """A task's pod spec ``pod``, a member of the run's gang when it has one."""
    if not wanted(plan):
        return pod
    return {**pod, "schedulingGroup": {"podGroupName": naming.pod_group_name(plan.name)}}


def pod_group(plan: Plan, jobs: Sequence[Manifest]) -> list[Manifest]:
    """The run's PodGroup for its task ``jobs`` (none without a gang): all of their pods or none.

    Kubernetes refuses a pod whose priority differs from its group's: the group takes the ``priorityClassName`` of
    the rendered pod templates, which must agree.
    """
    if not wanted(plan):
        return []
    classes = {job["spec"]["template"]["spec"].get("priorityClassName") for job in jobs}
    if len(classes) > 1:
        raise ValueError(f"the task pods of {plan.name} differ in priorityClassName ({sorted(map(str, classes))}): "
                         "one gang has one priority")
    spec: Manifest = {"schedulingPolicy": {"gang": {"minCount": len(jobs)}}}
    priority = classes.pop() if classes else None
    if priority:
        spec["priorityClassName"] = priority
    return [{"apiVersion": API_VERSION, "kind": KIND, "metadata": meta(plan, naming.pod_group_name(plan.name)),
             "spec": spec}]


def not_all_or_nothing(name: str, why: str) -> str:
    """The one line saying a run's start is not all-or-nothing, ``why``, and what a cluster needs for it."""
    return (f"the start of {name} is not all-or-nothing: {why}; its task pods are placed one by one, and a busy "
            f"cluster may place some and not the others (for a gang, a cluster admin enables {ENABLE})")


def off_note(plan: Plan) -> str | None:
    """What ``render`` says of a spec that turns the gang off, else None."""
    return None if wanted(plan) else not_all_or_nothing(plan.name, "kubernetes.gang is off")


def fit(api: KubeApi, dry_run: DryRun, dry_run_of: Callable[[Plan], DryRun]) -> DryRun:
    """The dry run ``up`` applies on ``api``'s cluster (see the module's contract); ``dry_run_of`` renders a plan."""
    plan = dry_run.plan
    if not wanted(plan):
        return dry_run
    with api.errors(f"discover {API_VERSION} (PodGroups)"):
        served = api.serves_pod_groups()
    if served:
        return dry_run
    why = f"the cluster does not serve {API_VERSION} PodGroups"
    if plan.spec.kubernetes.gang is GangPlacement.ON:
        raise LaunchError(f"kubernetes.gang is on but {why}: a cluster admin enables {ENABLE}, or set "
                          "kubernetes.gang: auto (or off) to start without it")
    log.warning("%s", not_all_or_nothing(plan.name, why))
    kubernetes = plan.spec.kubernetes.model_copy(update={"gang": GangPlacement.OFF})
    return dry_run_of(plan.model_copy(update={"spec": plan.spec.model_copy(update={"kubernetes": kubernetes})}))


class GangSize:
    """The ``minCount`` of a run's PodGroup, kept to the tasks the supervisor means to run (the module's contract).

    ``starting`` before a task's Job is started or replaced: back to every task of the plan (what ``up`` applied),
    so the pods a restart creates one Job at a time wait for each other; ``running(active)`` once a round of starts
    is over: the number of tasks whose current run has not ended (a task just started counts, its pod or not), so a
    group some of whose tasks ended for good still reaches it. One merge patch per change, none otherwise.
    """

    def __init__(self, api: KubeApi, plan: Plan, namespace: str) -> None:
        self._api = api
        self._name = naming.pod_group_name(plan.name)
        self._namespace = namespace
        self._planned = len(plan.tasks)
        self._count: int | None = self._planned if wanted(plan) else None  # what ``up`` applied; None: no gang

    def starting(self) -> None:
        self._set(self._planned)

    def running(self, active: int) -> None:
        if self._count is not None and active < self._count:
            self._set(max(1, active))

    def _set(self, count: int) -> None:
        if self._count is None or count == self._count:
            return
        with self._api.unless_gone(f"patch PodGroup {self._name}"):  # gone: the run is being taken down
            self._api.merge_patch_pod_group(self._name, self._namespace,
                                            {"spec": {"schedulingPolicy": {"gang": {"minCount": count}}}})
        self._count = count
