"""Load the user's training module and check it honours the contract.

Contract (see docs/user_code.md): the module named by ``RunConfig.training.module`` provides

- ``build_model(**args) -> tf.keras.Model``, compiled; called inside ``strategy.scope()``;
- ``make_dataset(input_context, global_batch_size, **args) -> tf.data.Dataset``: repeated, batched by
  ``input_context.get_per_replica_batch_size(global_batch_size)`` and sharded by ``input_context`` when one is
  given, else batched by ``global_batch_size`` (the strategy then splits each batch);
- optionally ``make_eval_dataset(global_batch_size, **args)``: finite, batched, used by the evaluator and the
  final evaluation;
- optionally ``train_step(model, optimizer, batch) -> loss`` for ``training.loop: custom``: runs once per
  replica, applies the gradients and returns ``tf.nn.compute_average_loss(...)`` of its replica (the
  entrypoint sums replicas with ``strategy.reduce``).

``training.args`` are passed as keyword arguments to every function except ``train_step``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from launcher.spec.models import TrainingLoop, TrainingSpec
from launcher.worker.task_errors import ConfigError


@dataclass(frozen=True)
class UserCode:
    module: ModuleType
    args: dict[str, Any]

    def build_model(self) -> Any:
        return self.module.build_model(**self.args)

    def make_dataset(self, input_context: Any, global_batch_size: int) -> Any:
        return self.module.make_dataset(input_context, global_batch_size, **self.args)

    @property
    def has_eval_dataset(self) -> bool:
        return callable(getattr(self.module, "make_eval_dataset", None))

    def make_eval_dataset(self, global_batch_size: int) -> Any:
        return self.module.make_eval_dataset(global_batch_size, **self.args)

    @property
    def train_step(self) -> Callable[[Any, Any, Any], Any] | None:
        return getattr(self.module, "train_step", None)


def load(training: TrainingSpec) -> UserCode:
    try:
        module = importlib.import_module(training.module)
    except ImportError as exc:
        raise ConfigError(f"training.module: cannot import {training.module!r}: {exc}") from None
    required = ["build_model", "make_dataset"]
    if training.loop is TrainingLoop.CUSTOM:
        required.append("train_step")
    missing = [name for name in required if not callable(getattr(module, name, None))]
    if missing:
        raise ConfigError(f"training.module {training.module!r} lacks {', '.join(missing)} (see docs/user_code.md)")
    return UserCode(module, dict(training.args))
