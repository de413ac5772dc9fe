"""Build the ``tf.distribute`` strategy a ``Selection`` names.

Contract: ``build_strategy(selection)`` expects TF_CONFIG in ``os.environ``
(the cluster resolvers read it) and returns the strategy; multi-worker peers
must already resolve (``launcher.worker.peers``). ``tpu_resolver`` is
injectable so the TPU branch is testable without a TPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from launcher.spec.models import Collective, Strategy, TPUSpec
from launcher.worker.selection import Selection
from launcher.worker.task_errors import ConfigError

COLLECTIVES = {
    Collective.AUTO: tf.distribute.experimental.CommunicationImplementation.AUTO,
    Collective.RING: tf.distribute.experimental.CommunicationImplementation.RING,
    Collective.NCCL: tf.distribute.experimental.CommunicationImplementation.NCCL,
}


def tpu_resolver_kwargs(tpu: TPUSpec | None) -> dict[str, Any]:
    """Arguments of ``TPUClusterResolver``: a TPU name (with zone/project) or a grpc:// address."""
    if tpu is None or not (tpu.name or tpu.address):
        raise ConfigError("strategy tpu needs tpu.name or tpu.address")
    kwargs: dict[str, Any] = {"tpu": tpu.address or tpu.name}
    if tpu.zone:
        kwargs["zone"] = tpu.zone
    if tpu.project:
        kwargs["project"] = tpu.project
    return kwargs


def gpu_count() -> int:
    return len(tf.config.list_physical_devices("GPU"))


def build_strategy(
    selection: Selection,
    *,
    tpu_resolver: Callable[..., Any] = tf.distribute.cluster_resolver.TPUClusterResolver,
) -> tf.distribute.Strategy:
    kind = selection.strategy
    if kind is Strategy.MULTI_WORKER_MIRRORED:
        options = tf.distribute.experimental.CommunicationOptions(implementation=COLLECTIVES[selection.collective])
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if kind is Strategy.PARAMETER_SERVER:
        return tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
    if kind is Strategy.MIRRORED:
        return tf.distribute.MirroredStrategy()
    if kind is Strategy.ONE_DEVICE:
        device = "/gpu:0" if gpu_count() else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if kind is Strategy.CENTRAL_STORAGE:
        return tf.distribute.experimental.CentralStorageStrategy()
    if kind is Strategy.TPU:
        resolver = tpu_resolver(**tpu_resolver_kwargs(selection.tpu))
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if kind is Strategy.DEFAULT:
        return tf.distribute.get_strategy()
    raise ConfigError(f"no strategy for {kind.value}")
