"""The planner: a pure function from a validated spec and a backend target to the plan.

Contract: ``make_plan`` does no I/O and starts nothing. The plan holds one task per replica (chief,
worker, ps, evaluator; indices from 0), the shared training ``cluster``, each task's command and
environment (target's, then the spec's, then the launcher's), the resolved TensorBoard log dir and
the ``JobPolicy`` (``launcher.plan.policy``). ``Plan.tf_config`` / ``Plan.task_env`` are what a
backend starts a task with; backends apply a plan, never re-derive it. TF_CONFIG follows TFJob; the
evaluator stays outside the training cluster.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from launcher.plan import logdir, naming
from launcher.plan.images import image_for
from launcher.plan.policy import JobPolicy, make_policy
from launcher.plan.programs import runs_entrypoint, wants_standby
from launcher.plan.targets import BackendKind, Target
from launcher.plan.workspace import Workspace, WorkspaceSource, plan_workspace
from launcher.protocol import env, events, paths
from launcher.protocol.roles import TaskRef
from launcher.protocol.runconfig import RunConfig
from launcher.spec import rules
from launcher.spec.models import ClusterSpec, Resources, RoleType, Strategy


class Task(BaseModel):
    """One process / container / pod. ``env`` excludes TF_CONFIG (see ``Plan.task_env``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: RoleType
    index: int
    address: str
    port: int
    image: str
    command: list[str]
    #: The command replaces the image's ENTRYPOINT (Kubernetes ``command``, compose ``entrypoint``) instead of
    #: following it (``args``, compose ``command``); containers only.
    replaces_entrypoint: bool = False
    #: The task runs the built-in entrypoint (``launcher.plan.programs.runs_entrypoint``).
    runs_entrypoint: bool = False
    #: The command of the task's standby, which a restart of the task becomes (``launcher.worker.standby``): a
    #: task ``launcher.plan.programs.wants_standby``, on a backend that keeps standbys; [] for none.
    standby_command: list[str] = []
    env: dict[str, str]
    resources: Resources

    @property
    def ref(self) -> TaskRef:
        return TaskRef(self.type, self.index)


class Plan(BaseModel):
    """Everything a backend needs to launch one cluster: the tasks, their TF_CONFIGs and the job policy.

    ``spec`` is kept for backend-specific settings (``kubernetes``); policies
    are read from ``policy``, never re-derived from the spec. ``event_token``
    authenticates the tasks' progress events (``launcher.protocol.events``); every
    task has it in its env; empty in a plan written before tokens (its events are not read).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    run_id: str
    event_token: str = ""
    backend: BackendKind
    #: Working directory of every task (the user's workspace); None: the image's own.
    workdir: str | None = None
    strategy: Strategy
    strategy_note: str
    cluster: dict[str, list[str]]
    tasks: list[Task]
    run_config: RunConfig
    policy: JobPolicy
    spec: ClusterSpec
    workspace: Workspace | None = None

    def tf_config(self, task: Task) -> dict[str, Any]:
        cluster = {"evaluator": [task.address]} if task.type is RoleType.EVALUATOR else self.cluster
        return {"cluster": cluster, "task": {"type": task.type.value, "index": task.index}}

    def task_env(self, task: Task) -> dict[str, str]:
        return {**task.env, env.TF_CONFIG: json.dumps(self.tf_config(task), separators=(",", ":"))}

    def task(self, name: str) -> Task:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task {name!r} in cluster {self.name!r}; tasks: {', '.join(t.name for t in self.tasks)}")

    def lead(self) -> Task:
        """The task that leads the job (``launcher.protocol.roles.lead_task``)."""
        return next(t for t in self.tasks if t.ref == self.policy.lead)

    def board_image(self) -> str:
        """The image a container backend runs the run's TensorBoard in: ``tensorboard.image``, else the lead task's."""
        return self.spec.tensorboard.image or self.lead().image


def program_env(run_config: RunConfig, name: str, lead: bool, event_token: str) -> dict[str, str]:
    """The variables a user program reads besides TF_CONFIG (``launcher.protocol.env``)."""
    return {
        env.CHECKPOINT_DIR: run_config.checkpoint_dir,
        env.BACKUP_DIR: paths.backup_dir(run_config.checkpoint_dir),
        env.MODEL_DIR: paths.model_dir(run_config.checkpoint_dir),
        env.IS_CHIEF: "1" if lead else "0",
        env.TASK_NAME: name,
        env.RUN_ID: run_config.run_id,
        env.EVENT_TOKEN: event_token,
    }


def make_plan(spec: ClusterSpec, target: Target, run_id: str = "manual", workspace: WorkspaceSource | None = None,
              event_token: str = events.MANUAL_TOKEN) -> Plan:
    """Plan ``spec`` for ``target``; ``spec`` must have passed validation (``launcher.api.load_spec``).

    With a ``workspace`` (``spec.workspace`` as scanned), tasks run in it: see ``launcher.plan.workspace``.
    A launch gives a fresh ``event_token`` (``launcher.protocol.events.new_token``).
    """
    strategy = rules.resolve_strategy(spec)
    checkpoint_dir = target.checkpoint_dir(spec)
    tensorboard_dir = logdir.log_dir(spec, checkpoint_dir)
    policy = make_policy(spec, strategy)
    run_config = RunConfig(
        name=spec.name,
        run_id=run_id,
        strategy=strategy,
        collective=spec.collective,
        training=spec.training,
        checkpoint_dir=checkpoint_dir,
        backup_every_steps=None if strategy is Strategy.PARAMETER_SERVER else spec.checkpoint.backup_every_steps,
        async_backups=spec.checkpoint.async_backups and strategy is not Strategy.PARAMETER_SERVER,
        expected_mtbf_seconds=spec.restart.expected_mtbf if spec.checkpoint.backup_every_steps == "auto" else None,
        tpu=spec.tpu,
        tensorboard_dir=tensorboard_dir,
        summary_every_steps=spec.tensorboard.update_steps,
        lead_runs_entrypoint=runs_entrypoint(spec, policy.lead.role, strategy),
    )
    target_env = target.task_env()
    job_env = {**env.BASE_TASK_ENV, **run_config.to_env()}
    if tensorboard_dir is not None:
        job_env[env.TENSORBOARD_DIR] = tensorboard_dir
    base_images = {role: image_for(spec, spec.roles.role(role)) for role in RoleType if spec.roles.replicas(role)}
    planned_workspace = workspace and plan_workspace(
        spec.name, workspace, list(base_images.values()) if target.runs_in_containers else None, target.registry(spec)
    )
    tasks: list[Task] = []
    for role in RoleType:
        role_spec = spec.roles.role(role)
        for index in range(role_spec.replicas):
            ordinal = len(tasks)
            name = naming.task_name(spec.name, role, index)
            tasks.append(
                Task(
                    name=name,
                    type=role,
                    index=index,
                    address=target.address(spec, role, index, ordinal),
                    port=target.port(spec, role, ordinal),
                    image=planned_workspace.image_of(base_images[role]) if planned_workspace and planned_workspace.images
                    else base_images[role],
                    command=[*_program(spec, role, strategy, target), *role_spec.args],
                    replaces_entrypoint=role_spec.replaces_entrypoint,
                    runs_entrypoint=runs_entrypoint(spec, role, strategy),
                    standby_command=[*target.standby(), *role_spec.args]
                    if target.keeps_standbys and wants_standby(spec, role, strategy) else [],
                    env={**target_env, **spec.env, **role_spec.env, **job_env,
                         **program_env(run_config, name, TaskRef(role, index) == policy.lead, event_token)},
                    resources=role_spec.resources,
                )
            )
    cluster: dict[str, list[str]] = {}
    for task in tasks:
        if task.type.trains:
            cluster.setdefault(task.type.value, []).append(task.address)
    return Plan(
        name=spec.name,
        run_id=run_id,
        event_token=event_token,
        backend=target.kind,
        workdir=planned_workspace.workdir if planned_workspace else target.workdir(),
        strategy=strategy,
        strategy_note=rules.describe_resolution(spec),
        cluster=cluster,
        tasks=tasks,
        run_config=run_config,
        policy=policy,
        spec=spec,
        workspace=planned_workspace or None,
    )


def _program(spec: ClusterSpec, role: RoleType, strategy: Strategy, target: Target) -> list[str]:
    own = spec.roles.role(role).command
    if own is not None:  # [] is the image's own command
        return own
    return target.entrypoint() if runs_entrypoint(spec, role, strategy) or spec.command is None else spec.command
