"""The batch script of a job: what ``render -b slurm`` writes and ``up -b slurm`` submits.

Contract: ``batch_script(plan)`` is a bash script whose ``#SBATCH`` lines size
one allocation for every task (``placement.allocation_options``), append its
output to ``batch.log``, make the job requeueable where it may run again
(``JobPolicy.requeueable``: a failure rule, the policy or a preemption can
restart it; else ``--no-requeue``: Slurm never starts it again) and ask Slurm for
``USR1`` ``WARNING_MARGIN_SECONDS`` plus the plan's save grace before the time
limit. It runs the ``slurm.setup`` lines, then ``exec``s the supervisor process
(``supervisor_process.command``: the harness every backend runs, with Slurm's ``host``) on the submit directory,
which holds ``plan.json`` (``FILES``): submit it from there. The only values
put in shell code are quoted (``shlex.quote``); the setup lines are the
user's own shell.
"""

from __future__ import annotations

import shlex

from launcher.backends import supervisor_process
from launcher.backends.slurm.placement import allocation_options
from launcher.backends.slurm.state import BATCH_LOG
from launcher.backends.slurm.target import python
from launcher.plan.planner import Plan
from launcher.plan.targets import BackendKind

SCRIPT = "job.sbatch"
PLAN = "plan.json"
#: The warning before the time limit leaves the tasks their save grace plus this much to requeue.
WARNING_MARGIN_SECONDS = 30


def batch_script(plan: Plan) -> str:
    warning = plan.policy.save_grace_seconds + WARNING_MARGIN_SECONDS
    options = [*allocation_options(plan), f"--output={BATCH_LOG}", "--open-mode=append",
               "--requeue" if plan.policy.requeueable() else "--no-requeue",
               f"--signal=B:USR1@{warning}"]
    lines = [
        "#!/bin/bash",
        f"# tfcluster job {plan.name} (run {plan.run_id}): submit with `sbatch {SCRIPT}` from the directory",
        f"# holding it and {PLAN}; tasks run as srun steps under tfcluster's supervisor, inside this allocation.",
        *(f"#SBATCH {option}" for option in options),
        *plan.spec.slurm.setup,
        f'exec {shlex.join(supervisor_process.command(BackendKind.SLURM, python(plan.spec)))} "$SLURM_SUBMIT_DIR"',
    ]
    return "\n".join(lines) + "\n"


def files(plan: Plan) -> dict[str, str]:
    """Every file a submit needs: the script and the plan it reads."""
    return {SCRIPT: batch_script(plan), PLAN: plan.model_dump_json()}
