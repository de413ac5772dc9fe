"""The Kubeflow TFJob (``kubeflow.org/v1``) vocabulary: the one home of the names and values that both the
reader (``launcher.spec.tfjob``) and the export (``render --format tfjob``, in the Kubernetes backend's
manifests) spell, so the two cannot drift apart.

Contract: each table maps tfcluster's typed value to the TFJob's spelling;
the reader inverts them (``ROLE_OF``, ``RESTART_OF``, ``SUCCESS_OF``), and
the export reads them as they are. A TFJob tfcluster exported carries its
own labels (``OWN_LABEL_PREFIX``, ``MANAGED_BY``), which the reader drops.
"""

from __future__ import annotations

from launcher.spec.models import RestartPolicy, RoleType, SuccessPolicy

API_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
#: The container the training operator treats as the TensorFlow one.
CONTAINER = "tensorflow"
#: The container port the training operator builds TF_CONFIG's addresses from.
PORT_NAME = "tfjob-port"
REPLICA_TYPES: dict[RoleType, str] = {
    RoleType.CHIEF: "Chief", RoleType.WORKER: "Worker", RoleType.PS: "PS", RoleType.EVALUATOR: "Evaluator",
}
#: Replica types read as a role but never written: Kubeflow's older name of the chief.
REPLICA_ALIASES: dict[str, RoleType] = {"Master": RoleType.CHIEF}
ROLE_OF: dict[str, RoleType] = {**{name: role for role, name in REPLICA_TYPES.items()}, **REPLICA_ALIASES}
RESTART_POLICIES: dict[RestartPolicy, str] = {
    RestartPolicy.NEVER: "Never", RestartPolicy.ON_FAILURE: "OnFailure",
    RestartPolicy.ALWAYS: "Always", RestartPolicy.EXIT_CODE: "ExitCode",
}
RESTART_OF: dict[str, RestartPolicy] = {name: policy for policy, name in RESTART_POLICIES.items()}
SUCCESS_POLICIES: dict[SuccessPolicy, str] = {SuccessPolicy.CHIEF: "ChiefWorker", SuccessPolicy.ALL_WORKERS: "AllWorkers"}
#: An empty successPolicy is the operator's default, ChiefWorker.
SUCCESS_OF: dict[str, SuccessPolicy] = {"": SuccessPolicy.CHIEF,
                                        **{name: policy for policy, name in SUCCESS_POLICIES.items()}}
#: ``runPolicy`` keys.
BACKOFF_LIMIT, ACTIVE_DEADLINE, TTL_AFTER_FINISHED, CLEAN_POD_POLICY = (
    "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "cleanPodPolicy")
#: ``runPolicy.schedulingPolicy`` and its key naming the PriorityClass (of the operator's PodGroup and its pods).
SCHEDULING_POLICY, PRIORITY_CLASS = "schedulingPolicy", "priorityClass"
#: What tfcluster does with the pods still running once a job ended (``cleanPodPolicy``), and what it reads as that.
CLEAN_RUNNING = "Running"
CLEAN_POLICIES_AS_RUNNING = ("Running", "All")
#: Labels tfcluster puts on what it creates: dropped when a TFJob it exported is read back.
OWN_LABEL_PREFIX = "tfcluster.io/"
MANAGED_BY = ("app.kubernetes.io/managed-by", "tfcluster")
#: What tfcluster's export writes into each pod on its own account (hardening, its service account's token
#: setting, its scratch and checkpoint volumes, its environment): dropped when a TFJob it exported (``MANAGED_BY``
#: among its labels) is read back, since tfcluster writes them again; never taken from another TFJob.
EXPORT_OWN_POD_FIELDS = ("automountServiceAccountToken", "enableServiceLinks", "securityContext")
EXPORT_OWN_CONTAINER_FIELDS = ("securityContext",)
EXPORT_OWN_VOLUMES = ("tmp", "tfcluster", "checkpoints", "workspace")
EXPORT_OWN_ENV_PREFIX = "TFCLUSTER_"
EXPORT_OWN_ENV = ("TF_USE_LEGACY_KERAS", "GRPC_FAIL_FAST", "PYTHONUNBUFFERED")
#: The pod field carried as ``checkpoint.save_grace_seconds`` (SIGTERM to SIGKILL).
GRACE_PERIOD = "terminationGracePeriodSeconds"
