"""The shared entrypoint every task runs: ``python -m launcher.worker``.

Contract: a task reads ``TFCLUSTER_JOB`` (``RunConfig``), its TF_CONFIG (or
builds it from ``TFCLUSTER_CLUSTER_FILE``, see ``launcher.worker.tfconfig``)
and ``TFCLUSTER_TASK_NAME``; it trains, serves (PSS ps/worker), or evaluates
(evaluator), reports progress as ``launcher.protocol.events`` lines on stdout and exits
with one of the codes in ``launcher.protocol.exitcodes``.

Only this package and ``launcher.examples`` import TensorFlow; the pure
modules here (``tfconfig``, ``selection``, ``peers``, ``usercode``, ``task_errors``)
do not. It imports only ``launcher.protocol`` and ``launcher.spec`` of the controller.
"""
