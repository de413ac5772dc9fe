"""The cluster spec: what a user writes in YAML, as typed pydantic models.

Contract: a ``ClusterSpec`` that constructs without error is *field-valid*
(types, ranges, names). Rules that relate several fields (which roles a
strategy needs, ...) live in ``launcher.spec.cross_checks`` and
are checked by ``launcher.spec.loader.load_spec``; only a spec that passed both is
handed to the planner.
"""

from __future__ import annotations

import difflib
import math
import re
import signal
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from launcher.spec.image_reference import ImageReference, RegistryReference
from launcher.spec.k8s_names import Annotations, DnsLabel, DnsSubdomain, LabelKey, LabelValue, QualifiedName
from launcher.spec.quantities import BYTES, byte_count

if TYPE_CHECKING:
    import re2

#: Patterns: a ``Field(pattern=...)`` is matched by pydantic's Rust regex engine, where ``$`` is the end of the
#: text (Python's ``re`` lets ``$`` match before a final newline, so the compiled ones are used with ``fullmatch``).
DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PY_MODULE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
ABSOLUTE_PATH = r"^/"
#: What each pattern means, for error messages people can act on.
PATTERN_MEANINGS = {
    DNS_LABEL: "must be a DNS-1123 label: lowercase letters, digits and '-', starting with a letter",
    PY_MODULE: "must be a dotted Python module name, e.g. mypackage.train",
    ABSOLUTE_PATH: "must be an absolute path (starting with /)",
    BYTES: "must be a byte quantity such as 512Mi or 4Gi (Mi = MiB; 'm' would mean 1/1000 byte)",
}

MIN_MEMORY_BYTES = 6 * 2**20


class Strategy(str, Enum):
    """tf.distribute strategy requested by the spec (``auto`` is resolved by the planner)."""

    AUTO = "auto"
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
    PARAMETER_SERVER = "parameter_server"
    MIRRORED = "mirrored"
    ONE_DEVICE = "one_device"
    DEFAULT = "default"
    CENTRAL_STORAGE = "central_storage"
    TPU = "tpu"


class Collective(str, Enum):
    """MultiWorkerMirrored all-reduce implementation (``tf.distribute.experimental.CommunicationImplementation``)."""

    AUTO = "auto"
    RING = "ring"
    NCCL = "nccl"


class RoleType(str, Enum):
    """The four TF_CONFIG task types, in the order tasks are planned (and listed everywhere)."""

    CHIEF = "chief"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"

    @property
    def order(self) -> int:
        """Position in plan order: sort roles (and tasks, with their index) by this."""
        return list(RoleType).index(self)

    @property
    def trains(self) -> bool:
        """True for the roles in the training cluster (chief, worker, ps); the evaluator stays out of it."""
        return self is not RoleType.EVALUATOR


class RestartPolicy(str, Enum):
    """When a failed task is started again.

    ``exit-code`` follows TFJob: exit codes >= 128 (killed by a signal,
    e.g. OOM or preemption) are retried, 1-127 (a bug) fail the job.
    """

    NEVER = "never"
    ON_FAILURE = "on-failure"
    EXIT_CODE = "exit-code"
    ALWAYS = "always"


class SuccessPolicy(str, Enum):
    """When the job counts as succeeded.

    ``chief``: the chief (or worker 0 when there is no chief) exited 0;
    ``all-workers``: the chief and every worker exited 0.
    """

    CHIEF = "chief"
    ALL_WORKERS = "all-workers"


class TrainingLoop(str, Enum):
    """How the entrypoint trains: Keras ``fit`` or the user's custom step (``strategy.run``)."""

    FIT = "fit"
    CUSTOM = "custom"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


def _check_env_name(key: str) -> str:
    if not ENV_NAME.fullmatch(key):
        raise ValueError("is not a valid environment variable name")
    return key


#: An environment variable name (each bad key is reported at its own path; names the launcher
#: owns are refused by ``launcher.plan.checks``, which knows them from ``launcher.protocol.env``).
EnvName = Annotated[str, AfterValidator(_check_env_name)]


def _at_least_6mi(memory: str) -> str:
    if byte_count(memory) < MIN_MEMORY_BYTES:
        raise ValueError(f"is {byte_count(memory)} bytes; a task needs at least 6Mi (Docker's minimum)")
    return memory


class Resources(_Model):
    """Per-task resource requests (also used as limits by the container backends)."""

    cpu: Annotated[float, Field(gt=0, le=1024)] | None = Field(
        None, description="CPU cores, e.g. 0.5 or 4."
    )
    memory: Annotated[str, Field(pattern=BYTES), AfterValidator(_at_least_6mi)] | None = Field(
        None, description="Memory as a Kubernetes quantity, e.g. 512Mi or 4Gi."
    )
    gpu: int = Field(0, ge=0, le=16, description="GPUs (nvidia.com/gpu).")


class RoleSpec(_Model):
    """One role (chief, worker, ps or evaluator): ``replicas`` identical tasks."""

    replicas: int = Field(1, ge=0, le=10000, description="Number of tasks of this role.")
    image: ImageReference | None = Field(None, description="Container image; defaults to the cluster's.")
    command: list[str] | None = Field(
        None,
        description=(
            "Replaces the shared entrypoint (argument list, never a shell string). In containers it "
            "replaces the image's CMD; the image's ENTRYPOINT (tini in the worker image) still runs it. "
            "[] runs the image's own command (containers only), with `args` as its CMD when given."
        ),
    )
    replaces_entrypoint: bool = Field(
        False,
        description=(
            "In containers, `command` (a non-empty one) replaces the image's ENTRYPOINT as well as its CMD, as "
            "Kubernetes' `command` does (a TFJob's `command`); the local backend runs the command either way."
        ),
    )
    args: list[str] = Field(default_factory=list, description="Extra arguments appended to the command.")
    env: dict[EnvName, str] = Field(default_factory=dict, description="Extra environment variables.")
    resources: Resources = Field(default_factory=Resources)
    port: int = Field(2222, ge=1024, le=65535, description="gRPC port inside a container (local picks free ports).")



class Roles(_Model):
    """The roles of the cluster; an absent role has no tasks."""

    chief: RoleSpec | None = None
    worker: RoleSpec | None = None
    ps: RoleSpec | None = None
    evaluator: RoleSpec | None = None

    def replicas(self, role: RoleType) -> int:
        spec = getattr(self, role.value)
        return spec.replicas if spec is not None else 0

    def role(self, role: RoleType) -> RoleSpec:
        return getattr(self, role.value) or RoleSpec(replicas=0)


class TrainingSpec(_Model):
    """The training program the shared entrypoint runs (see ``launcher.worker.usercode``)."""

    module: str = Field(
        "launcher.examples.mnist",
        pattern=PY_MODULE,
        description="Python module providing build_model() and make_dataset(); see docs/user_code.md.",
    )
    args: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Keyword arguments passed to the module's functions."
    )
    loop: TrainingLoop = TrainingLoop.FIT
    epochs: int = Field(3, ge=1, le=100000)
    steps_per_epoch: int = Field(50, ge=1, le=10_000_000)
    batch_size_per_replica: int = Field(64, ge=1, le=1_000_000)


MAX_BACKUP_STEPS = 10_000_000


def _backup_interval(value: object) -> object:
    """One clear problem for a bad ``backup_every_steps`` (not one per member of its union)."""
    if value is None or value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"a number of steps, auto, or null (got {value!r})")
    if not 1 <= value <= MAX_BACKUP_STEPS:
        raise ValueError(f"between 1 and {MAX_BACKUP_STEPS} steps (got {value})")
    return value


def _duration_seconds(value: object) -> object:
    """A positive duration in seconds, from a number of seconds or a Go-style duration (``90s``, ``1h30m``, ``2d``)."""
    if value is None:
        return None
    given = value
    if isinstance(value, str):
        import durationpy  # the controller's (with kubernetes): not an import of the task side

        try:
            value = durationpy.from_str(value.strip()).total_seconds()
        except (durationpy.DurationError, ValueError):
            raise ValueError(f"a duration such as 90s, 30m, 1h30m, 2d or a number of seconds (got {value!r})") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a duration such as 90s, 30m, 1h30m, 2d or a number of seconds (got {value!r})")
    try:
        seconds = float(value)
    except OverflowError:  # an int past a float's range (from Python: YAML refuses one beyond 64 bits)
        seconds = math.inf
    if not math.isfinite(seconds):
        raise ValueError("must be a finite duration")
    if not seconds > 0:
        raise ValueError(f"must be a positive duration (got {given!r})")
    return seconds


class CheckpointSpec(_Model):
    """Where checkpoints live and how often they are written.

    ``dir`` must be reachable by every task: a local path for the local
    backend (default ``./tfcluster-runs/<name>``), a path on the shared
    volume for compose/Kubernetes (default ``/checkpoints``), or an object
    store URL (``gs://``, ``s3://``).
    """

    dir: str | None = Field(None, min_length=1)
    backup_every_steps: Annotated[
        Annotated[int, Field(ge=1, le=MAX_BACKUP_STEPS)] | Literal["auto"] | None, BeforeValidator(_backup_interval)
    ] = Field(
        100,
        description=(
            "BackupAndRestore every N steps (MWMS, single task); null = every epoch; auto = about every "
            "sqrt(2 x save time x MTBF) (Young-Daly), the MTBF from the run's restarts or restart.expected_mtbf (else "
            "backups hold training up at most 2% of the time), from the measured save and step times, chosen "
            "again at each epoch's end. PSS backs up per epoch only (N or auto there: a spec problem). Small N repeats less work after a failure."
        ),
    )
    async_backups: bool = Field(
        True,
        description=(
            "Write backups in a background thread (MWMS, single task): a save pauses training only to copy the "
            "variables to host memory; a task killed mid-write restores the previous backup. PSS saves synchronously."
        ),
    )
    save_grace_seconds: int = Field(
        60,
        ge=1,
        le=86400,
        description=(
            "Seconds a task gets after a termination notice (SIGTERM: down, Ctrl-C, docker stop, eviction) "
            "for the coordinated save before it is killed (compose stop_grace_period, "
            "Kubernetes terminationGracePeriodSeconds)."
        ),
    )


class TensorBoardSpec(_Model):
    """TensorBoard summaries written by the shared entrypoint (``tfcluster tensorboard NAME`` shows them).

    ``dir`` None means ``<checkpoint dir>/tensorboard``; a relative ``dir`` is
    relative to the checkpoint dir (so it stays on the shared volume in
    containers); ``gs://``/``s3://`` URLs work. ``image`` is read by
    ``Plan.board_image``.
    """

    enabled: bool = Field(True, description="Write training and validation summaries.")
    dir: str | None = Field(None, min_length=1, description="Log dir; default <checkpoint dir>/tensorboard.")
    update_steps: int = Field(
        10, ge=1, le=10_000_000, description="Write the training scalars every N steps (and at each epoch's end)."
    )
    image: ImageReference | None = Field(
        None,
        description="Image of the TensorBoard container (compose) or pod (k8s); default: the lead task's image "
        "(the worker image and workspace layers have TensorBoard; name one when your own image lacks it).",
    )


class RuleAction(str, Enum):
    """What a failure rule (``restart.rules``) does with a failure it matches."""

    RESTART = "restart"  # the task's restart group restarts (uses max_restarts, whatever the policy)
    FAIL = "fail"  # the job fails now, naming the rule
    CONTINUE = "continue"  # the failed task is left ended; the job goes on


#: The most output lines of a failed task a rule's ``log_pattern`` is searched in (its last ones).
LOG_TAIL_LINES = 50


def _signal_name(name: str) -> str:
    if name not in signal.Signals.__members__:
        known = ", ".join(s.name for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV, signal.SIGABRT))
        raise ValueError(f"unknown signal {name!r}: a name such as {known}")
    return name


def _log_pattern(pattern: str) -> str:
    """Google's RE2 (linear time in the text searched, whatever the pattern): the one engine of log patterns."""
    compile_log_pattern(pattern)
    return pattern


def compile_log_pattern(pattern: str) -> re2._Regexp:
    """A rule's ``log_pattern`` compiled by RE2, quietly (RE2 logs a bad pattern to stderr by default);
    ``ValueError`` saying why for one RE2 cannot compile. RE2 is imported here, by the controller only: the
    tasks import this module but never compile a pattern, and the worker image does not install RE2."""
    import re2

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"does not compile as an RE2 pattern: {why}") from None


class FailureRule(_Model):
    """One of ``restart.rules``: which failures it matches (every stated matcher must hold) and what it does.

    A failure is a task's non-zero exit that is no preemption. ``exit_codes``: its exit code is one of them;
    ``signals``: it was killed by one of them (``SIGKILL`` also matches a task the kernel's OOM killer ended);
    ``log_pattern``: an RE2 pattern found in one of the task's last ``LOG_TAIL_LINES`` output lines;
    ``roles``: the task's role is one of them. A rule must state at least one matcher.
    """

    exit_codes: tuple[Annotated[int, Field(ge=0, le=255)], ...] = ()
    signals: tuple[Annotated[str, AfterValidator(_signal_name)], ...] = ()
    log_pattern: Annotated[str, AfterValidator(_log_pattern)] | None = Field(None, min_length=1)
    roles: tuple[RoleType, ...] = ()
    action: RuleAction

    @model_validator(mode="after")
    def _matches_something(self) -> FailureRule:
        if not (self.exit_codes or self.signals or self.log_pattern or self.roles):
            raise ValueError("states no matcher (exit_codes, signals, log_pattern or roles): it would match "
                             "every failure; to mean that, list the roles")
        return self


class RestartSpec(_Model):
    """Restart policy and budgets (restart events of the whole job, counted across tasks).

    ``policy`` and ``max_restarts`` govern failures; a preempted exit (the task
    saved on a termination notice) restarts its group under every policy,
    counted against ``max_preemptions`` only (past it, as a failure).
    """

    policy: RestartPolicy = RestartPolicy.ON_FAILURE
    max_restarts: int = Field(3, ge=0, le=1000)
    max_preemptions: int = Field(
        100,
        ge=0,
        le=100000,
        description=(
            "Restarts after a preemption (exit 143: saved on a termination notice); they do not use max_restarts. "
            "Past it a preemption counts as a failure."
        ),
    )
    warm: bool = Field(
        True,
        description=(
            "Keep a standby per training task of the built-in entrypoint, from the moment the task starts: an "
            "interpreter with TensorFlow imported (about 0.5 GB of memory, no CPU while it waits) that a restart "
            "becomes, instead of starting Python and importing TensorFlow again. Local processes, compose (a "
            "standby container per task), Slurm (a standby step per task) and Kubernetes (a standby process in the "
            "task's pod, kept by its agent)."
        ),
    )
    rules: tuple[FailureRule, ...] = Field(
        (),
        description=(
            "Failure rules, first match wins: a failure no rule matches is decided by `policy` as before. "
            "`restart` counts against max_restarts; `fail` fails the job at once; `continue` leaves the task ended."
        ),
    )
    expected_mtbf: Annotated[float | None, BeforeValidator(_duration_seconds)] = Field(
        None,
        description=(
            "The mean time between failures you expect of this job (90s, 30m, 1h30m, 2d, or seconds), for "
            "backup_every_steps: auto until the run has seen a failure of its own: backups about every "
            "sqrt(2 x save time x MTBF) (Young-Daly). Unset: the failures observed, else backups hold training "
            "up at most 2% of the time. Its one use: stated without auto (or under parameter_server) it is a spec "
            "problem."
        ),
    )


class StallAction(str, Enum):
    """What the stall watchdog does once the job's progress stopped (``launcher.supervision.stall``)."""

    RESTART = "restart"  # the training group restarts from the last backup (a failure: uses max_restarts)
    FAIL = "fail"
    WARN = "warn"


class StallSpec(_Model):
    """The stall watchdog: a job whose steps stop advancing while its tasks live is stalled.

    After a silence long for the job's own pace (``launcher.supervision.stall``) the watchdog reads every
    task's stacks twice, a few seconds apart: unchanged with a task holding its peers is a stall, moving
    stacks never are. ``timeout_seconds`` is the floor of a stall on time alone (the stacks cannot be read,
    or tell nothing): no such stall is declared sooner; the stacks are read after min(it, 30 s) at least.
    """

    timeout_seconds: int = Field(
        600, ge=1, le=7 * 24 * 3600,
        description="Seconds without progress before the job counts as stalled on time alone, at least: where the "
        "tasks' stacks cannot be read or tell nothing (the watchdog waits longer when the job's own step times, "
        "saves or first step call for it). The stacks are read after min(this, 30 s) at least: unchanged with a "
        "task holding its peers is a stall then, moving stacks never are.",
    )
    action: StallAction = Field(
        StallAction.RESTART,
        description="restart: the training group restarts from the last backup (uses max_restarts, reason "
        "`stalled`); fail: the job fails; warn: status says so and the job runs on.",
    )


class TPUSpec(_Model):
    """TPU to connect to when ``strategy: tpu`` (TPUClusterResolver)."""

    name: str | None = Field(None, min_length=1)
    zone: str | None = Field(None, min_length=1)
    project: str | None = Field(None, min_length=1)
    address: str | None = Field(None, min_length=1, description="grpc://host:port instead of a name.")


class Toleration(_Model):
    """A pod toleration, as Kubernetes spells it; how its fields fit together is ``launcher.spec.cross_checks``'."""

    key: QualifiedName | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(None, ge=0)


class VolumeClaim(_Model):
    """The ReadWriteMany claim that holds checkpoints on Kubernetes."""

    name: DnsSubdomain | None = Field(None, description="Existing claim; when unset one is created.")
    size: str = Field("10Gi", pattern=BYTES)
    storage_class: DnsSubdomain | None = None


#: The sources a Kubernetes pod volume may name (``core/v1 Volume``, every field but ``name``).
VOLUME_SOURCES = frozenset({
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi", "downwardAPI",
    "emptyDir", "ephemeral", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs",
    "hostPath", "image", "iscsi", "nfs", "persistentVolumeClaim", "photonPersistentDisk", "portworxVolume",
    "projected", "quobyte", "rbd", "scaleIO", "secret", "storageos", "vsphereVolume",
})


class PodVolume(BaseModel):
    """A pod volume written as Kubernetes spells it: ``name`` plus exactly one source, e.g.
    ``{name: data, persistentVolumeClaim: {claimName: imagenet, readOnly: true}}``.

    The source's own fields are passed to the API server as written (it checks them when the run is launched).
    """

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra={
        "minProperties": 2, "maxProperties": 2, "propertyNames": {"enum": ["name", *sorted(VOLUME_SOURCES)]},
    })

    name: DnsLabel

    @model_validator(mode="after")
    def _one_source(self) -> PodVolume:
        sources = sorted(self.model_extra or {})
        if len(sources) != 1 or sources[0] not in VOLUME_SOURCES:
            found = f"found {', '.join(sources)}" if sources else "found none"
            close = [m for s in sources for m in difflib.get_close_matches(s, VOLUME_SOURCES, 1) if s != m]
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"a volume needs exactly one source such as persistentVolumeClaim, nfs, secret, "
                             f"configMap or emptyDir ({found}){hint}")
        if not isinstance((self.model_extra or {})[sources[0]], dict):
            raise ValueError(f"{sources[0]} must be a mapping of the source's fields (an empty one: {{}})")
        return self

    @property
    def source(self) -> dict[str, Any]:
        """``{<source kind>: {<its fields>}}``."""
        return dict(self.model_extra or {})


class VolumeMount(_Model):
    """Where a volume of ``kubernetes.volumes`` appears in every task's container."""

    name: DnsLabel = Field(..., description="A volume of kubernetes.volumes.")
    mount_path: str = Field(..., pattern=ABSOLUTE_PATH, description="Absolute path in the container.")
    read_only: bool = False
    sub_path: str | None = Field(None, min_length=1, pattern=r"^[^/]", description="A path inside the volume.")


class GangPlacement(str, Enum):
    """Whether a Kubernetes run's task pods are placed all together or not at all (a ``scheduling.k8s.io/v1beta1``
    PodGroup with a gang policy: ``launcher.backends.kubernetes.gang``)."""

    AUTO = "auto"  # a gang where the cluster serves PodGroups (``up`` asks it; render and dry-run write the gang)
    ON = "on"  # a gang; ``up`` refuses a cluster that does not serve PodGroups
    OFF = "off"  # each pod placed on its own, as before PodGroups


class SupervisorPlacement(_Model):
    """Where the run's supervisor pod may go: a node selector and tolerations of its own. It never takes the
    tasks' (``kubernetes.node_selector``, ``kubernetes.tolerations``): it needs no GPU and no simulated node."""

    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)


class KubernetesSpec(_Model):
    """Kubernetes-only settings; ignored by the other backends."""

    namespace: DnsLabel = "default"
    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    image_pull_secrets: list[DnsSubdomain] = Field(default_factory=list)
    env_from_secrets: list[DnsSubdomain] = Field(default_factory=list, description="Secrets whose keys become env vars.")
    scheduler_name: QualifiedName | None = Field(None, description="e.g. volcano, for gang scheduling.")
    gang: GangPlacement = Field(
        GangPlacement.AUTO,
        description="Place the task pods all together or not at all (a PodGroup, Kubernetes 1.37's gang "
        "scheduling): auto where the cluster serves it (`up` asks; render and dry-run write it), on (`up` refuses a "
        "cluster without it), off.",
    )
    priority_class: DnsSubdomain | None = Field(
        None,
        description="An existing PriorityClass: every pod of the run (its supervisor's too) gets it as its "
        "priorityClassName; a run of a higher one may preempt it (a preemption: it resumes from its backup).",
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Labels on every object of the run (Jobs, Services, ConfigMap, ...)."
    )
    pod_labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Labels on every task's pod, e.g. for a policy's or a monitor's selector."
    )
    pod_annotations: Annotations = Field(default_factory=dict, description="e.g. Kueue/Volcano PodGroup keys.")
    volume_claim: VolumeClaim = Field(default_factory=VolumeClaim)
    ttl_seconds_after_finished: int | None = Field(3600, ge=0)
    service_account: DnsSubdomain | None = Field(
        None,
        description="An existing ServiceAccount the pods run as (its own automountServiceAccountToken applies); "
        "when unset tfcluster creates <name>-runner, with no API token.",
    )
    volumes: list[PodVolume] = Field(default_factory=list, description="Pod volumes, as Kubernetes spells them.")
    volume_mounts: list[VolumeMount] = Field(
        default_factory=list, description="Mounts of those volumes in every task's container (not TensorBoard's)."
    )
    registry: RegistryReference | None = Field(
        None,
        description="Registry (host[:port][/path]) the workspace image is pushed to and the nodes pull it from.",
    )
    supervisor: bool = Field(
        True,
        description="Supervise the run inside the cluster: a pod <name>-supervisor (restarts, the stall "
        "watchdog, failure rules, success, cleanup) with a Role on the run's own objects, so no `tfcluster up`/`watch` "
        "needs to run; false: a supervisor process on the launching machine supervises it.",
    )
    supervisor_placement: SupervisorPlacement = Field(
        default_factory=SupervisorPlacement,
        description="The supervisor pod's own node_selector and tolerations (default: none, wherever the scheduler "
        "puts it); node_selector and tolerations above place the tasks only.",
    )


#: A Slurm name (partition, account, QOS): what ``sbatch`` accepts without quoting.
SLURM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"
#: ``sbatch --time``: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS.
SLURM_TIME = r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})$"
#: One line: no newline or NUL (a line of the batch script, an option, a path).
ONE_LINE = r"^[^\n\r\x00]+$"
#: An ``sbatch`` option as it is written on its command line: ``--name[=value]`` or ``-X[value]``.
SBATCH_OPTION = r"^--?[A-Za-z][^\n\r\x00]*$"
PATTERN_MEANINGS.update({
    SLURM_NAME: "must be a Slurm name: letters, digits, '_', '.', '+' and '-'",
    SLURM_TIME: "must be a Slurm time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
    ONE_LINE: "must be one non-empty line",
    SBATCH_OPTION: "must be one sbatch option as on its command line, e.g. --mail-type=END",
})


class SlurmPorts(str, Enum):
    """How a Slurm job's block of TensorFlow ports is chosen (``launcher.backends.slurm.placement``)."""

    RANDOM = "random"  # from a secret the job draws when it first starts: not computable from the job id
    JOB_ID = "job-id"  # from the job id: jobs submitted fewer than the block count apart never collide


class SlurmSpec(_Model):
    """Slurm-only settings (``-b slurm``); ignored by the other backends. Defaults work on a plain cluster."""

    partition: str | None = Field(None, pattern=SLURM_NAME, description="sbatch --partition; default: the cluster's.")
    account: str | None = Field(None, pattern=SLURM_NAME, description="sbatch --account.")
    qos: str | None = Field(None, pattern=SLURM_NAME, description="sbatch --qos.")
    time_limit: str | None = Field(None, pattern=SLURM_TIME, description="sbatch --time, e.g. 2:00:00 or 1-12.")
    constraint: str | None = Field(None, pattern=ONE_LINE, description="sbatch --constraint (node features).")
    exclusive: bool = Field(False, description="sbatch --exclusive: nodes not shared with other jobs.")
    tasks_per_node: int | None = Field(
        None, ge=1, le=1024,
        description="Tasks on each node (nodes = tasks / this, rounded up); default: spread, one per node as far "
        "as the cluster has nodes.",
    )
    sbatch_options: list[Annotated[str, Field(pattern=SBATCH_OPTION)]] = Field(
        default_factory=list, description="Extra sbatch options, one per item, e.g. [--mail-type=END].")
    setup: list[Annotated[str, Field(pattern=ONE_LINE)]] = Field(
        default_factory=list,
        description="Shell lines the batch script runs before the tasks, e.g. `module load cuda` or "
        "`source /shared/venv/bin/activate`.",
    )
    python: str | None = Field(
        None, pattern=ONE_LINE,
        description="The Python on the nodes that runs tfcluster and the built-in entrypoint; default: the "
        "interpreter running tfcluster (a virtualenv on the shared filesystem).",
    )
    ports: SlurmPorts = Field(
        SlurmPorts.RANDOM,
        description="The job's block of TensorFlow ports: random (from a secret the job keeps in its state dir, "
        "not computable from the public job id; two jobs sharing a node collide with a small chance) or job-id "
        "(job id modulo the number of blocks: jobs submitted fewer than that apart never collide, and anyone "
        "can compute the ports).",
    )


class ClusterSpec(_Model):
    """A whole training cluster: roles, strategy, program, checkpoints, policies."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={"title": "tfcluster cluster spec"},
    )

    name: str = Field(..., pattern=DNS_LABEL, description="DNS-1123 label naming the cluster.")
    strategy: Strategy = Strategy.AUTO
    collective: Collective = Collective.AUTO
    image: ImageReference | None = Field(
        None,
        description="Container image of every role that names none; default: tfcluster-worker:latest, "
        "or tfcluster-worker:latest-gpu for a role that requests GPUs.",
    )
    env: dict[EnvName, str] = Field(default_factory=dict)
    command: list[str] | None = Field(
        None,
        min_length=1,
        description=(
            "Your own training program (argument list, e.g. [python, train.py]) instead of the built-in "
            "entrypoint: the chief, the workers and the evaluator run it (under parameter_server the ps and "
            "worker tasks run the built-in server and the program runs on the chief and the evaluator). "
            "A role's own `command` overrides it."
        ),
    )
    workspace: str | None = Field(
        None,
        min_length=1,
        description="A directory (relative to where tfcluster runs) that every task runs in: local tasks start "
        "there; compose and k8s tasks run a thin image layer FROM their image with it at /workspace and its "
        "requirements.txt installed (rebuilt only when it changed).",
    )
    roles: Roles
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    tensorboard: TensorBoardSpec = Field(default_factory=TensorBoardSpec)
    restart: RestartSpec = Field(default_factory=RestartSpec)
    success_policy: SuccessPolicy = SuccessPolicy.CHIEF
    deadline_seconds: int | None = Field(None, ge=1, description="Fail the job after this long.")
    stall: StallSpec = Field(default_factory=StallSpec)
    tpu: TPUSpec | None = None
    kubernetes: KubernetesSpec = Field(default_factory=KubernetesSpec)
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)

