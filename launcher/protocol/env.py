"""Names of the environment variables the controller sets and the task reads: one definition each.

Contract: the controller sets ``TF_CONFIG`` (or, on Kubernetes, the
``TFCLUSTER_CLUSTER_FILE`` / ``TFCLUSTER_TASK_TYPE`` / ``TFCLUSTER_TASK_INDEX``
trio the task builds it from), ``TFCLUSTER_JOB`` (``RunConfig``),
``TFCLUSTER_TASK_NAME``, ``TFCLUSTER_TENSORBOARD_DIR`` (when summaries are on), the
user-program variables (``CHECKPOINT_DIR`` ... ``EVENT_TOKEN``) and ``BASE_TASK_ENV``; a spec may set none of
``RESERVED`` nor anything starting with ``RESERVED_PREFIX``.
"""

from __future__ import annotations

TF_CONFIG = "TF_CONFIG"
#: ``RunConfig`` JSON, identical for every task of a cluster.
JOB = "TFCLUSTER_JOB"
#: This task's name (``<cluster>-<role>-<index>``); also marks the task's processes.
TASK_NAME = "TFCLUSTER_TASK_NAME"
#: File holding the training ``cluster`` dict (Kubernetes: one ConfigMap instead of one TF_CONFIG per pod).
CLUSTER_FILE = "TFCLUSTER_CLUSTER_FILE"
TASK_TYPE = "TFCLUSTER_TASK_TYPE"
TASK_INDEX = "TFCLUSTER_TASK_INDEX"
#: The evaluator's own host:port when TF_CONFIG is built from the cluster file.
TASK_ADDRESS = "TFCLUSTER_TASK_ADDRESS"
#: The run's TensorBoard log dir (summaries: ``train/``, ``validation/``); unset when TensorBoard is off.
TENSORBOARD_DIR = "TFCLUSTER_TENSORBOARD_DIR"
#: Set by the Kubernetes Job controller on each pod of an Indexed Job.
JOB_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: The user program's contract (docs/spec.md "Bring your own script"): where to write, who leads, which run.
#: The shared checkpoint dir (``RunConfig.checkpoint_dir``), reachable by every task.
CHECKPOINT_DIR = "TFCLUSTER_CHECKPOINT_DIR"
#: ``BackupAndRestore`` backup dir under it (``launcher.protocol.checkpoint_layout.backup_dir``).
BACKUP_DIR = "TFCLUSTER_BACKUP_DIR"
#: Where the lead task exports the final model (``launcher.protocol.checkpoint_layout.model_dir``).
MODEL_DIR = "TFCLUSTER_MODEL_DIR"
#: "1" on the task that leads the job (``launcher.protocol.roles.lead_task``), else "0". tfcluster's code
#: says "lead" for that task; the variable keeps TensorFlow's word (which also calls worker 0 of a
#: chief-less cluster its chief), since user programs read it by this name.
IS_CHIEF = "TFCLUSTER_IS_CHIEF"
#: This launch's id (``RunConfig.run_id``), fresh for every ``up``/``run``.
RUN_ID = "TFCLUSTER_RUN_ID"
#: The token a task's progress events carry (``launcher.protocol.events``), fresh for every launch (``Plan.event_token``).
EVENT_TOKEN = "TFCLUSTER_EVENT_TOKEN"
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
GRPC_FAIL_FAST = "GRPC_FAIL_FAST"

#: Environment every task gets, on every backend, before anything else runs.
BASE_TASK_ENV = {
    LEGACY_KERAS: "1",  # Keras 3 cannot fit() under MWMS or PSS; tf_keras can.
    GRPC_FAIL_FAST: "use_caller",  # PSS: fail RPCs to dead peers fast so the coordinator reacts.
    "PYTHONUNBUFFERED": "1",  # progress events reach the launcher as they happen.
}

#: Variables the launcher owns; a spec may not set them.
RESERVED = frozenset({TF_CONFIG, LEGACY_KERAS, GRPC_FAIL_FAST, JOB_COMPLETION_INDEX})
RESERVED_PREFIX = "TFCLUSTER_"
