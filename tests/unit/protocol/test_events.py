"""The progress contract: typed events on the wire, one reader of a run's authenticated lines, one fold."""

from __future__ import annotations

import io
import logging

import pytest

from launcher.protocol import env, events
from launcher.protocol.events import EventKind, EventReader, emit, format_event, new_token, task_token
from launcher.protocol.job_progress import JobProgress, counts, fold, progress, seed
from launcher.protocol.runconfig import RunConfig
from launcher.spec.models import Strategy, TrainingSpec

EVERY_KIND = [
    events.Started(strategy="MirroredStrategy", num_replicas_in_sync=2, epochs=3, time=1.0),
    events.Restored(epoch=1, step_in_epoch=2, step=12, time=2.0),
    events.Step(step=14, epoch=1, total_steps=30, loss=0.5, time=3.0),
    events.EpochEnd(epoch=1, step=20, metrics={"loss": 0.4, "accuracy": 0.8}, input_wait_fraction=0.1, time=4.0),
    events.BackupInterval(steps=7, save_seconds=0.002, step_seconds=0.05, time=5.0),
    events.WarmStart(import_seconds=3.2, waited_seconds=41.0, time=6.0),
    events.CheckpointSaved(path="/c/ckpt-0002", epoch=1, time=7.0),
    events.Evaluation(checkpoint="/c/ckpt-0002", metrics={"accuracy": 0.7}, time=8.0),
    events.Finished(metrics={"loss": 0.3}, model_path="/c/model", time=9.0),
    events.Failed(reason="ValueError: empty", exit_code=1, time=10.0),
    events.Preempted(step=20, exit_code=143, time=11.0),
    events.StepTime(epoch=1, step=20, seconds_per_step=0.1, input_seconds_per_batch=0.02, time=12.0),
    events.StacksOnSignal(signal="SIGUSR1", time=13.0),
]
TOKEN = "0123456789abcdef0123456789abcdef"
READER = EventReader(TOKEN)
STEP = '{"event":"step","task":"t","time":1,"step":3}'


def test_every_kind_has_a_model_and_survives_the_wire() -> None:
    assert {e.event for e in EVERY_KIND} == set(EventKind)
    stream = io.StringIO()
    for event in EVERY_KIND:
        emit(event, "job-chief-0", stream, TOKEN)
    lines = stream.getvalue().split("\n")[:-1]  # as the backends split them: at newlines only
    assert all(line.startswith(f"\rTFCLUSTER_EVENT/{TOKEN} {{") for line in lines)
    assert [READER.parse(line) for line in lines] == [e.model_copy(update={"task": "job-chief-0"}) for e in EVERY_KIND]


def test_an_event_after_a_progress_bar_on_the_same_line_is_read() -> None:
    """Keras' progress bar and tqdm redraw a line with carriage returns and end it only later: the event's own
    carriage return starts it where a terminal would."""
    line = "\r 3/10 [=====>....] - ETA: 1s - loss: 0.5" + format_event(events.Step(step=3, time=1), "t", TOKEN)
    assert READER.parse(line) == events.Step(task="t", time=1, step=3)
    assert READER.parse(f"TFCLUSTER_EVENT/{TOKEN} {STEP}\r\n") == events.Step(task="t", time=1, step=3)  # written by hand, CRLF


@pytest.mark.parametrize("line", [
    f"row 7,TFCLUSTER_EVENT/{TOKEN} {STEP}",  # the marker, with the token, inside a data line
    f"2026-01-01 host | TFCLUSTER_EVENT/{TOKEN} {STEP}",  # behind a log prefix
    f" TFCLUSTER_EVENT/{TOKEN} {STEP}",
    f"TFCLUSTER_EVENT {STEP}",  # the old form, without a token
    f"TFCLUSTER_EVENT/ {STEP}",
    f"TFCLUSTER_EVENT/{TOKEN[:-1]} {STEP}",  # a wrong token (a prefix of the right one)
    f"TFCLUSTER_EVENT/{TOKEN}0 {STEP}",
    f"TFCLUSTER_EVENT/{'f' * len(TOKEN)} {STEP}",  # another run's (a fixed one: the ids are the same in each process)
    f"TFCLUSTER_EVENT/{TOKEN}{STEP}",
    f"TFCLUSTER_EVENT/{TOKEN} {STEP}\rmore",  # what a terminal shows of the line is not the event
    "epoch 1/3 - loss 0.4",
])
def test_a_line_is_an_event_only_with_the_runs_token_at_its_start(line: str) -> None:
    assert READER.parse(line) is None and not READER.carries_event(line)


def test_a_reader_without_a_token_accepts_nothing() -> None:
    """A plan or Job from before tokens: no line is its event, not even one with an empty token."""
    reader = EventReader("")
    assert reader.parse(f"TFCLUSTER_EVENT/ {STEP}") is None and reader.parse(f"TFCLUSTER_EVENT {STEP}") is None
    assert not reader.reads and READER.reads


def test_each_launch_draws_its_own_token_and_a_task_reads_it_from_its_env() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(t) == 32 and t.isalnum() for t in tokens)
    assert task_token({env.EVENT_TOKEN: TOKEN}) == TOKEN and task_token({}) == ""


@pytest.mark.parametrize("payload, problem", [
    ('{"event":"teleported","task":"t","time":1}', "event"),
    ('{"event":"step","task":"t","time":1}', "step"),
    ('{"event":"step","task":"t","time":1,"step":"many"}', "step"),
    ('{"event":"epoch","task":"t","time":1,"epoch":0,"metrics":{"loss":"low"}}', "metrics"),
    ("[1, 2]", "event"),
    ("{not json", "json"),
])
def test_a_marked_line_that_breaks_the_contract_is_logged_and_skipped(
        payload: str, problem: str, caplog: pytest.LogCaptureFixture) -> None:
    line = f"TFCLUSTER_EVENT/{TOKEN} {payload}"
    with caplog.at_level(logging.WARNING, logger=events.__name__):
        assert READER.parse(line) is None
    assert READER.carries_event(line)
    [record] = caplog.records
    assert problem in record.getMessage().lower() and "\n" not in record.getMessage()
    with caplog.at_level(logging.WARNING, logger=events.__name__):
        assert READER.parse(line) is None
    assert len(caplog.records) == 1  # read again (the next poll of a pod's log): not logged again


def test_fields_a_newer_task_adds_are_ignored() -> None:
    event = READER.parse(f'TFCLUSTER_EVENT/{TOKEN} {{"event":"step","task":"t","time":1,"step":3,"step_seconds":{{"compute":0.1}}}}')
    assert event == events.Step(task="t", time=1, step=3)


def _run_config(**fields: object) -> RunConfig:
    training = TrainingSpec(epochs=3, steps_per_epoch=10)
    return RunConfig.model_validate({"name": "j", "run_id": "r", "strategy": Strategy.DEFAULT, "checkpoint_dir": "/c",
                                     "training": training, **fields})


def test_the_seed_comes_from_the_run_config() -> None:
    assert seed(_run_config()) == JobProgress(epochs=3, total_steps=30)
    assert seed(_run_config(backup_every_steps=20)).backup_every_steps == 20
    assert seed(_run_config(backup_every_steps="auto")).backup_every_steps is None  # until the tasks chose it
    assert seed(_run_config(lead_runs_entrypoint=False)) == JobProgress()
    assert seed(_run_config()).reported and not JobProgress().reported


def test_the_fold_keeps_what_later_events_do_not_say() -> None:
    lead = [e.model_copy(update={"task": "lead"}) for e in EVERY_KIND]
    result = fold(seed(_run_config()), lead, from_lead=True)
    assert result == JobProgress(  # the time of Finished (9.0): the kinds after it do not count
        event=EventKind.FINISHED, time=9.0, strategy="MirroredStrategy", num_replicas_in_sync=2, epochs=3,
        epoch=1, step=20, total_steps=30, loss=0.4, metrics={"loss": 0.3}, input_wait_fraction=0.1,
        evaluation={"accuracy": 0.7}, model_path="/c/model", backup_every_steps=7,
    )


def test_only_the_lead_trains_the_progress_but_any_task_evaluates() -> None:
    step, evaluation = events.Step(step=5, time=1.0), events.Evaluation(checkpoint="c", metrics={"loss": 1.0}, time=2.0)
    assert not counts(step, from_lead=False) and counts(step, from_lead=True)
    assert counts(evaluation, from_lead=False)
    assert fold(JobProgress(), [step, evaluation], from_lead=False) == JobProgress(evaluation={"loss": 1.0})
    for kind in (events.CheckpointSaved(path="p", epoch=0, time=3.0), events.Failed(time=4.0), events.Preempted(time=5.0)):
        assert not counts(kind, from_lead=True) and progress(JobProgress(step=3), kind) == JobProgress(step=3)
