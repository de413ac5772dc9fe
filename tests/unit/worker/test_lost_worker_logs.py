"""Under ParameterServer, a step's logs that left with the worker that ran them cost that step's point, not the job.

The real case (CI, ``test_pss_sigterm_a_worker_exits_preempted_and_the_chief_saves_its_weights_before_it``): worker 0
exited right after its step returned; the coordinator's fetch of that step's loss copies a tensor held by worker 0
(``RemoteValue.fetch``: an ``Identity`` on the coordinator) and failed with ``UnavailableError``, which ended the
coordinator (exit 175) instead of letting it train on the other worker and save on its own notice. The stand-in
below raises TensorFlow's own error class from ``fetch`` as ``RemoteValueImpl.fetch`` does.
"""

from __future__ import annotations

import io
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402

from helpers.required import require_module  # noqa: E402

pytestmark = pytest.mark.tf  # imports TensorFlow: not in the fast lane
tf = require_module("tensorflow")

from launcher.protocol.events import EventReader  # noqa: E402
from launcher.worker.callbacks import ProgressEvents, fetched  # noqa: E402
from launcher.worker.reporter import Reporter  # noqa: E402


class Remote:
    """A PSS ``RemoteValue``: ``fetch`` returns the value, or raises what a lost worker's fetch raises."""

    def __init__(self, value: object = None, error: Exception | None = None):
        self.value, self.error = value, error

    def fetch(self) -> object:
        if self.error is not None:
            raise self.error
        return self.value


def gone() -> Exception:
    return tf.errors.UnavailableError(None, None, "2 root error(s) found.\n  (0) UNAVAILABLE: recvmsg:Connection reset")


def test_logs_are_fetched_whole_or_per_value() -> None:
    assert fetched(Remote({"loss": 0.5})) == {"loss": 0.5}  # fit: one RemoteValue of the logs
    assert fetched({"loss": Remote(0.25), "acc": 1.0}) == {"loss": 0.25, "acc": 1.0}  # the custom loop
    assert fetched(None) == {}


@pytest.mark.parametrize("logs", [lambda: Remote(error=gone()), lambda: {"loss": Remote(error=gone())}])
def test_logs_lost_with_their_worker_are_empty(logs: object) -> None:
    assert fetched(logs()) == {}  # type: ignore[operator]


def test_other_errors_are_not_taken_for_a_lost_worker() -> None:
    with pytest.raises(tf.errors.InvalidArgumentError):
        fetched(Remote(error=tf.errors.InvalidArgumentError(None, None, "a bug in the user's step")))


def test_the_step_is_reported_without_its_loss_and_training_goes_on() -> None:
    stream = io.StringIO()
    reporter = Reporter("pst-chief-0", is_lead=True, stream=stream, token="t0k")
    progress = ProgressEvents(reporter, steps_per_epoch=2, epochs=1, every=1, input_probe=None)
    progress.on_epoch_begin(0)
    progress.on_train_batch_begin(0)
    progress.on_train_batch_end(0, Remote(error=gone()))
    progress.on_train_batch_begin(1)
    progress.on_train_batch_end(1, Remote({"loss": 0.5}))
    steps = [e for e in map(EventReader("t0k").parse, stream.getvalue().splitlines()) if e and e.event == "step"]
    assert [(e.step, e.loss) for e in steps] == [(1, None), (2, 0.5)]
