"""Slurm's own commands (sbatch, squeue, scontrol, scancel), run as argument lists, never through a shell.

Contract: ``run(args)`` returns a command's stdout. A controller that does
not answer is retried ``CONTROLLER_RETRIES`` times, ``RETRY_PAUSE_SECONDS``
apart (as the Kubernetes backend retries its API server), then raises
``LaunchError`` with one line naming the controller; any other failure
raises ``LaunchError`` with Slurm's first line of error; missing commands
raise ``BackendUnavailable``. Every call is bounded by ``COMMAND_TIMEOUT_SECONDS``.
``job(job_id)`` reads one job from the controller (None once the controller
forgot it); ``allocation_nodes`` the nodes of an allocation, in order, with
their ``NodeAddr`` (one ``scontrol`` call: the supervisor's start waits on it).
"""

from __future__ import annotations

import re
import subprocess
import time
from typing import NamedTuple

from launcher.backends.slurm.placement import Node
from launcher.errors import BackendUnavailable, LaunchError

CONTROLLER_RETRIES = 3
RETRY_PAUSE_SECONDS = 1.0
COMMAND_TIMEOUT_SECONDS = 30.0
#: What Slurm's commands say when slurmctld does not answer.
UNREACHABLE = re.compile(r"Unable to contact slurm controller|Socket timed out|Connection refused|"
                         r"Zero Bytes were transmitted", re.IGNORECASE)
#: ``scontrol -o`` prints one record per line as ``Key=value`` pairs.
FIELD = re.compile(r"(\w+)=(\S*)")
#: Job states in which the job waits for an allocation, and those in which it has ended.
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
#: ``ESLURM_ALREADY_DONE`` (2021) as the 8-bit exit status scancel returns, often with nothing on stderr.
ALREADY_DONE_STATUS = 2021 % 256
ALREADY_DONE_TEXTS = ("Invalid job id", "already completing or completed")
ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                   "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"})


class Refused(LaunchError):
    """A Slurm command answered and refused; ``status`` is its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    @property
    def already_done(self) -> bool:
        """The job or step had already ended (or was ending) when the command reached it."""
        return self.status == ALREADY_DONE_STATUS or any(text in str(self) for text in ALREADY_DONE_TEXTS)


class SlurmJob(NamedTuple):
    """A job as the controller describes it."""

    state: str
    reason: str
    restarts: int
    nodes: str

    @property
    def waiting(self) -> bool:
        return self.state in WAITING

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def run(args: list[str], retries: int = CONTROLLER_RETRIES, cwd: str | None = None) -> str:
    for attempt in range(1, retries + 1):
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, cwd=cwd,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise BackendUnavailable(f"{args[0]} not found: the Slurm client commands (sbatch, squeue, scontrol, "
                                     f"scancel) must be on PATH") from None
        except subprocess.TimeoutExpired:
            error = f"{args[0]} did not answer in {COMMAND_TIMEOUT_SECONDS:.0f} s"
        else:
            if done.returncode == 0:
                return done.stdout
            error = next((line.strip() for line in done.stderr.splitlines() if line.strip()), f"exit {done.returncode}")
            if not UNREACHABLE.search(error):
                raise Refused(f"{' '.join(args[:2])}: {error}", done.returncode)
        if attempt < retries:
            time.sleep(RETRY_PAUSE_SECONDS)
    raise LaunchError(f"the Slurm controller does not answer ({error}; tried {retries} times)")


def records(output: str) -> list[dict[str, str]]:
    return [dict(FIELD.findall(line)) for line in output.splitlines() if line.strip()]


def job(job_id: str, retries: int = CONTROLLER_RETRIES) -> SlurmJob | None:
    try:
        found = records(run(["scontrol", "-o", "show", "job", job_id], retries=retries))
    except LaunchError as exc:
        if "Invalid job id" in str(exc):
            return None
        raise
    if not found:
        return None
    record = found[0]
    return SlurmJob(record.get("JobState", "UNKNOWN"), record.get("Reason", ""), int(record.get("Restarts", "0")),
                    record.get("NodeList", ""))


def allocation_nodes(node_list: str) -> list[Node]:
    """The nodes of ``node_list`` (a Slurm hostlist such as ``n[1-3]``) in the order ``scontrol`` lists them (the
    hostlist's), with their ``NodeAddr``: one call to the controller. Any fixed order serves: it only numbers
    the allocation's nodes for ``placement.resolve``."""
    if not node_list.strip():
        return []
    found = records(run(["scontrol", "-o", "show", "node", node_list]))
    return [Node(r["NodeName"], r.get("NodeAddr") or r["NodeName"]) for r in found if r.get("NodeName")]


def steps(job_id: str) -> dict[str, str]:
    """``{step name: JOB.STEP}`` of the job's running steps."""
    found = {}
    for line in run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i|%j"]).splitlines():
        step, _, name = line.strip().partition("|")
        found[name] = step
    return found


def _signal(args: list[str]) -> None:
    """Run ``scancel args``; a job or step that has ended meanwhile is no error."""
    try:
        run(["scancel", *args])
    except Refused as exc:
        if not exc.already_done:
            raise


def signal_step(step: str, signal: str | None = None) -> None:
    """Signal step ``JOB.STEP`` (None: cancel it); a step that has ended meanwhile is no error."""
    _signal([*([f"--signal={signal}"] if signal else []), step])


def submit(script: str, cwd: str) -> str:
    """Submit ``script`` from ``cwd``; the job id."""
    return run(["sbatch", "--parsable", script], retries=1, cwd=cwd).strip().split(";")[0]


def signal_batch(job_id: str, signal: str) -> None:
    """Signal the batch step of ``job_id``; a batch step that has ended meanwhile is no error."""
    _signal(["--batch", f"--signal={signal}", job_id])


def cancel(job_id: str) -> None:
    run(["scancel", job_id])


def requeue(job_id: str) -> None:
    run(["scontrol", "requeue", job_id])
