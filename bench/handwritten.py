"""Hand-written tf_keras MultiWorkerMirrored scripts, run as a plan's training tasks (shared by the benches).

Contract: ``MNIST_PREAMBLE`` (``.format(batch=...)``) is the start of such a
script: ``tf`` imported with tf_keras, ``strategy``, ``model`` (the MNIST CNN
of ``launcher.examples.mnist``, built in the strategy's scope),
``global_batch`` and ``dataset`` (auto-sharded by data, prefetched), as the
entrypoint builds them. ``run_training_tasks(plan, script, *args)`` starts
``python -c script *args`` as every training task of ``plan`` with the task's
environment (TF_CONFIG from the plan, the allocator a local launch preloads;
``env`` over it), waits for all, and returns the first
task's (the chief's) standard output; a task that fails ends the bench with
the tails of the tasks' standard errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from helpers.tf_cluster import TF_QUIET  # the benches put tests/ on sys.path
from launcher.plan.planner import Plan

REPO = Path(__file__).resolve().parent.parent

MNIST_PREAMBLE = """
import json, os, sys, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
from launcher.examples import mnist

strategy = tf.distribute.MultiWorkerMirroredStrategy()
global_batch = {batch} * strategy.num_replicas_in_sync
with strategy.scope():
    model = mnist.build_model()
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
dataset = mnist.make_dataset(None, global_batch).with_options(options).prefetch(tf.data.AUTOTUNE)
"""


def run_training_tasks(plan: Plan, script: str, *args: str, timeout: float = 600,
                       env: Mapping[str, str] | None = None) -> str:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *args],
            env={**os.environ, **TF_QUIET, **plan.task_env(task), **(env or {})},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        )
        for task in plan.tasks if task.type.trains
    ]
    outputs = [p.communicate(timeout=timeout) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("\n".join(err[-2000:] for _, err in outputs))
    return outputs[0][0]
