"""A training program's history without TensorFlow, for ``tfcluster report`` (tests/integration/test_report_browser.py).

Every task reports ``started``; the evaluator one evaluation. The chief reports five steps with their loss and a
backup at step 5, then fails (exit 1) on its first run; on its second it resumes from step 5, reports steps 6-10
and a backup at step 10, and finishes. Each step takes STEP_SECONDS, as training does, so the timeline has
lengths to draw. Events are written as a program of the user's writes them by hand (docs/spec.md: the marker, the token
from the environment, the JSON with the event's time).
"""

import json
import os
import sys
import time
from pathlib import Path

STEP_SECONDS = 0.05
TOKEN = os.environ["TFCLUSTER_EVENT_TOKEN"]
ROLE = json.loads(os.environ["TF_CONFIG"])["task"]["type"]


def emit(event: dict) -> None:
    print("\rTFCLUSTER_EVENT/" + TOKEN + " " + json.dumps({**event, "time": time.time()}), flush=True)


emit({"event": "stacks_on_signal", "signal": "SIGUSR2"})  # as the entrypoint announces its handler, before started
emit({"event": "started", "strategy": "MultiWorkerMirroredStrategy", "num_replicas_in_sync": 2, "role": ROLE})
if ROLE == "evaluator":
    emit({"event": "evaluation", "checkpoint": "ckpt-5", "metrics": {"loss": 0.2}})
if ROLE != "chief":
    sys.exit(0)
marker = Path("first-run-done")  # in the workspace: the chief's second run finds it
first = not marker.exists()
if not first:
    emit({"event": "restored", "epoch": 0, "step": 5})
for step in range(1, 6) if first else range(6, 11):
    time.sleep(STEP_SECONDS)
    emit({"event": "step", "step": step, "total_steps": 10, "loss": 1.0 / step})
    if step % 5 == 0:
        emit({"event": "checkpoint", "path": f"ckpt-{step}", "epoch": 0})
if first:
    marker.touch()
    emit({"event": "failed", "reason": "injected failure", "exit_code": 1})
    sys.exit(1)
emit({"event": "finished", "metrics": {"loss": 0.1}})
