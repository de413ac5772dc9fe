"""Progress of your own training program, shown by tfcluster like the built-in entrypoint's.

Contract: in a task started by tfcluster, ``ProgressCallback`` (Keras ``fit``) and ``report_step`` /
``report_epoch`` / ``report_finished`` (custom loops) emit the events of ``launcher.protocol.events``
with the run's token; only the job's lead task reports steps and epochs (harmless elsewhere). The
first use also installs the on-request stack dump. Imports TensorFlow; of tfcluster only the worker
side. Non-numeric metrics are reported as null, and so are NaN and infinite ones; a count or time out of the
protocol's bounds (a negative step: ``launcher.protocol.events``) raises pydantic's ``ValidationError``, a
``ValueError``, here rather than print an event the controller would skip.

    from launcher.progress import ProgressCallback
    model.fit(dataset, epochs=3, steps_per_epoch=100, callbacks=[ProgressCallback()])
"""

from __future__ import annotations

import json
import os
import socket
from functools import cache
from typing import Any

from launcher.protocol import env, events
from launcher.protocol.roles import TaskRef, lead_task
from launcher.spec.models import RoleType
from launcher.worker import callbacks
from launcher.worker.reporter import Reporter, scalar
from launcher.worker.stackdump import dump_stacks_on_signal

__all__ = ["ProgressCallback", "report_step", "report_epoch", "report_finished"]

#: Default: a ``step`` event every this many steps (and at each epoch's end).
EVERY_STEPS = 10


@cache
def reporter() -> Reporter:
    """This task's reporter, from the environment tfcluster set; from now on the task dumps its stacks on request."""
    task = Reporter(os.environ.get(env.TASK_NAME) or socket.gethostname(), is_lead=_leads())
    dump_stacks_on_signal(task)
    return task


def _leads() -> bool:
    """``TFCLUSTER_IS_CHIEF``; unset (e.g. an image's own command), the lead by ``TF_CONFIG``; neither: True."""
    if env.IS_CHIEF in os.environ:
        return os.environ[env.IS_CHIEF] == "1"
    try:
        config = json.loads(os.environ.get(env.TF_CONFIG) or "{}")
        task = TaskRef(RoleType(config["task"]["type"]), int(config["task"]["index"]))
        return task == lead_task(RoleType(role) for role in config["cluster"])
    except (ValueError, KeyError, TypeError):
        return True


class ProgressCallback(callbacks.ProgressEvents):
    """Keras callback: ``started``, ``step`` every ``every`` steps, ``epoch`` and ``finished`` events.

    Epochs and steps per epoch are read from ``fit``'s own parameters; with a
    dataset of unknown length ``step`` counts within the run and has no total.
    """

    def __init__(self, every: int = EVERY_STEPS):
        super().__init__(reporter(), steps_per_epoch=0, epochs=0, every=every, input_probe=None)
        self._last: events.Metrics = {}

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        super().on_train_begin(logs)
        epochs, steps = self.params.get("epochs") or 0, self.params.get("steps") or 0
        self.steps_per_epoch, self.total_steps = steps, steps * epochs
        strategy = self.model.distribute_strategy
        self.reporter.lead(events.Started(strategy=type(strategy).__name__,
                                          num_replicas_in_sync=strategy.num_replicas_in_sync, epochs=epochs))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(epoch, logs)
        self._last = {k: scalar(v) for k, v in callbacks.fetched(logs).items()}

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.reporter.lead(events.Finished(metrics=self._last))


def report_step(step: int, loss: Any = None, *, epoch: int | None = None, total_steps: int | None = None) -> None:
    """One training step done (global count from 1), in epoch ``epoch`` (from 0) of ``total_steps``."""
    reporter().lead(events.Step(step=int(step), loss=scalar(loss), epoch=None if epoch is None else int(epoch),
                                total_steps=None if total_steps is None else int(total_steps)))


def report_epoch(epoch: int, **metrics: Any) -> None:
    """Epoch ``epoch`` (from 0) done, with its metrics (``loss``, ``accuracy``, ...)."""
    reporter().lead(events.EpochEnd(epoch=int(epoch), metrics=_scalars(metrics)))


def report_finished(model_path: str | None = None, **metrics: Any) -> None:
    """Training is over (the live view shows the final metrics and ``model_path``)."""
    reporter().lead(events.Finished(metrics=_scalars(metrics), model_path=model_path))


def _scalars(values: dict[str, Any]) -> events.Metrics:
    return {k: scalar(v) for k, v in values.items()}

