"""The supervisor's small timing collaborators: the deadline, the linger after success, faults in a row, and the
publisher's change detection."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from launcher.errors import LaunchError
from launcher.plan.targets import BackendKind
from launcher.supervision.backoff import Backoff, NotNow
from launcher.supervision.deadline import Deadline
from launcher.supervision.faults import FaultsInARow
from launcher.supervision.goodput import Ledger
from launcher.supervision.linger import linger
from launcher.supervision.publisher import GOODPUT_REFRESH_SECONDS, Publisher
from launcher.supervision.status import JobStatus, State
from launcher.supervision.tuning import Tuning


def test_the_deadline_counts_from_the_jobs_first_start() -> None:
    assert not Deadline(None, 0.0).passed()
    assert Deadline(60, time.time() - 61).passed()  # an adopted job is not granted its time again
    assert not Deadline(60, time.time()).passed()
    assert Deadline(60, 0.0).message == "failed: deadline of 60 s exceeded"


def test_faults_in_a_row_give_up_at_the_limit_and_a_good_round_starts_again() -> None:
    faults = FaultsInARow(2)
    assert not faults.failed(ConnectionError("x"))
    faults.ok()
    assert not faults.failed(ConnectionError("x")) and faults.failed(ConnectionError("x")) and faults.count == 2


def test_the_linger_ends_once_nothing_runs_or_at_the_fault_limit() -> None:
    polls: list[int] = []
    linger(lambda: polls.append(1), lambda: None, lambda: len(polls) < 3, 60.0, Tuning(poll_seconds=0.0),
           threading.Event())
    assert len(polls) == 3

    def broken() -> None:
        polls.append(1)
        raise ConnectionError("gone")

    polls.clear()
    linger(broken, lambda: None, lambda: True, 60.0, Tuning(poll_seconds=0.0, fault_retries=4), threading.Event())
    assert len(polls) == 4

    def unreachable() -> None:  # nothing known now: no fault, the others keep their time
        polls.append(1)
        raise NotNow("503 ServiceUnavailable")

    polls.clear()
    linger(unreachable, lambda: None, lambda: len(polls) < 6, 60.0, Tuning(poll_seconds=0.0, fault_retries=4),
           threading.Event())
    assert len(polls) == 6


def test_only_a_changed_status_is_published_and_a_failed_write_is_tried_again() -> None:
    written: list[JobStatus] = []
    failing = [True]
    now = [0.0]

    def write(status: JobStatus) -> None:
        if failing[0]:
            raise OSError("disk full")
        written.append(status)

    publisher = Publisher(write, lambda: now[0], Backoff(1.0, jitter=lambda: 1.0))
    status = JobStatus("job", BackendKind.LOCAL, State.RUNNING, goodput=Ledger.launched(0.0).goodput(1.0))
    assert not publisher.publish_changed(status)
    failing[0] = False
    now[0] += 1.0  # its backoff's first pause
    assert publisher.publish_changed(status) and publisher.publish_changed(status) and len(written) == 1
    later = replace(status, goodput=Ledger.launched(0.0).goodput(1.0 + GOODPUT_REFRESH_SECONDS))
    assert publisher.publish_changed(later) and len(written) == 2  # only its goodput, but stale
    assert publisher.publish_changed(replace(later, state=State.SUCCEEDED)) and len(written) == 3


def test_failed_writes_are_tried_again_backed_off_then_at_the_normal_pace() -> None:
    """A store down or throttling (an API server restarting, or answering 429): ``publish_changed`` tries no write
    before the pause passed, the pause doubles while the writes keep failing, ``retry_now`` ends it (the engine
    answered again), and after a success every change is written at once."""
    tries: list[float] = []
    failing = [True]
    now = [0.0]

    def write(status: JobStatus) -> None:
        tries.append(now[0])
        if failing[0]:
            raise LaunchError("cannot update ConfigMap job-config: 429 TooManyRequests")

    publisher = Publisher(write, lambda: now[0], Backoff(0.5, jitter=lambda: 1.0))
    status = JobStatus("job", BackendKind.LOCAL, State.RUNNING)
    for _ in range(15):  # rounds 0.5 s apart, to 7 s
        publisher.publish_changed(status)
        now[0] += 0.5
    assert tries == [0.0, 0.5, 1.5, 3.5]  # 0.5, 1, 2 s between tries, then 4: the next not before 7.5
    publisher.retry_now()
    failing[0] = False
    assert publisher.publish_changed(status) and tries[-1] == now[0] == 7.5
    changed = replace(status, message="restarting")
    assert publisher.publish_changed(changed) and publisher.publish_changed(replace(changed, message="x"))
    assert len(tries) == 7  # back at the normal pace: every change written at once
