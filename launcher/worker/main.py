"""Run one task: read its configuration, pick its action, map failures to exit codes.

Contract: ``main(environ)`` returns the process exit code
(``launcher.protocol.exitcodes``) and emits ``failed`` before any non-zero
one but ``PREEMPTED``, which ``preempted`` precedes (SIGTERM:
``launcher.worker.preemption``). Peers of a multi-worker task are awaited (DNS), and an MWMS task's leader
until it listens, before the strategy is built. Imported only by ``launcher.worker.__main__``, after
``TF_USE_LEGACY_KERAS`` is set.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from collections.abc import Mapping

import tensorflow as tf
from pydantic import ValidationError

from launcher.protocol import env, events
from launcher.protocol.exitcodes import ExitCode
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import Strategy
from launcher.worker import lifecycle, usercode
from launcher.worker.context import TaskContext
from launcher.worker.evaluator import evaluate
from launcher.worker.peers import wait_for_leader, wait_for_peers
from launcher.worker.preemption import exit_on_notice
from launcher.worker.reporter import Reporter
from launcher.worker.selection import MULTI_WORKER, Duty, leader_address, peer_addresses, select
from launcher.worker.stackdump import dump_stacks_on_signal
from launcher.worker.strategies import gpu_count
from launcher.worker.task_errors import ConfigError, PeerUnavailable, TerminationNotice
from launcher.worker.tfconfig import resolve_tf_config
from launcher.worker.train import train

log = logging.getLogger("launcher.worker")

#: TF errors that mean a peer went away or cannot be reached, not a bug.
PEER_ERRORS = (
    PeerUnavailable,
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.DeadlineExceededError,
)


def main(environ: Mapping[str, str] = os.environ) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.setLevel(logging.INFO)
    reporter = Reporter(environ.get(env.TASK_NAME) or socket.gethostname(), is_lead=False, token=events.task_token(environ))
    exit_on_notice()
    dump_stacks_on_signal(reporter)
    try:
        ctx = _context(environ, reporter)
        _run(ctx)
    except TerminationNotice as exc:
        reporter.emit(events.Preempted(step=exc.step, exit_code=int(ExitCode.PREEMPTED)))
        return ExitCode.PREEMPTED
    except (ConfigError, ValidationError) as exc:
        return _failed(reporter, ExitCode.CONFIG, exc)
    except Exception as exc:
        if _is_peer_error(exc):
            return _failed(reporter, ExitCode.PEER_UNAVAILABLE, exc)
        log.exception("task failed")
        return _failed(reporter, ExitCode.FAILED, exc)
    return ExitCode.OK


def _context(environ: Mapping[str, str], reporter: Reporter) -> TaskContext:
    try:
        run_config = RunConfig.from_env(environ)
    except RuntimeError as exc:
        raise ConfigError(str(exc)) from None
    tf_config = resolve_tf_config(environ)
    if tf_config:
        os.environ[env.TF_CONFIG] = json.dumps(tf_config)  # the cluster resolvers read it from here
    selection = select(run_config, tf_config, gpu_count())
    reporter.is_lead = selection.is_lead
    return TaskContext(reporter.task, run_config, tf_config, selection, usercode.load(run_config.training), reporter)


def _run(ctx: TaskContext) -> None:
    duty = ctx.selection.duty
    if duty is Duty.EVALUATE:
        evaluate(ctx)
        return
    if ctx.selection.strategy in MULTI_WORKER:
        wait_for_peers(peer_addresses(ctx.tf_config))
    if ctx.selection.strategy is Strategy.MULTI_WORKER_MIRRORED and (leader := leader_address(ctx.tf_config)):
        wait_for_leader(leader)
    if duty is Duty.SERVE:
        lifecycle.serve_until_done(ctx.selection, ctx.tf_config, ctx.run_config.checkpoint_dir, ctx.run_config.run_id)
        ctx.reporter.emit(events.Finished())
    else:
        train(ctx)


def _is_peer_error(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, PEER_ERRORS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _failed(reporter: Reporter, code: ExitCode, exc: BaseException) -> int:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reporter.emit(events.Failed(reason=f"{type(exc).__name__}: {reason}", exit_code=int(code)))
    return int(code)
