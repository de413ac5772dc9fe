"""A task's last line skips TensorFlow's native log noise (real lines, from TensorFlow 2.21 on a CPU machine)."""

from __future__ import annotations

import pytest

from fakes.scripted_runtime import ScriptedRuntime
from launcher import api
from launcher.supervision.noise import is_noise
from launcher.supervision.supervisor import Supervisor
from launcher.supervision.tuning import Tuning

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795465561.475645   17644 port.cc:153] oneDNN custom operations are on. You may see slightly different "
    "numerical results due to floating-point round-off errors from different computation orders. To turn them off, "
    "set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795465561.476885   17644 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.",
    "I0000 00:00:1795465561.995861   17644 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available "
    "CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 AVX512_FP16 AVX_VNNI AMX_TILE AMX_INT8 "
    "AMX_BF16 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795465564.908588   17644 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call "
    "to cuInit: UNKNOWN ERROR (303)",
    "W0000 00:00:1732384000.123456    4242 gpu_device.cc:2344] Cannot dlopen some GPU libraries.",
    "2024-03-01 10:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.",
    "2024-03-01 10:00:00.123456: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Unable to register cuDNN factory",
]
KEPT = [
    "epoch 1/3 - loss 0.4",
    "Traceback (most recent call last):",
    "ValueError: cannot reshape array of size 10 into shape (3,)",
    "F0000 00:00:1795465564.908588   17644 collective_ops.cc:12] Check failed: group_size > 0",
    "WARNING: something of the program's own",
    "I0000 is how my program numbers its items",
]


@pytest.mark.parametrize("line", NOISE)
def test_tensorflow_native_log_lines_are_noise(line: str) -> None:
    assert is_noise(line) and is_noise(f"  {line}\r")


@pytest.mark.parametrize("line", KEPT)
def test_the_programs_own_lines_and_fatal_ones_are_kept(line: str) -> None:
    assert not is_noise(line)


def test_a_tasks_last_line_and_error_skip_the_noise() -> None:
    runtime = ScriptedRuntime({"job-chief-0": [None], "job-worker-0": [(1, 1)]},
                              output={"job-worker-0": ["ValueError: bad shape", *NOISE], "job-chief-0": ["loss 0.5", *NOISE]})
    plan = api.plan(api.validate_data({"name": "job", "roles": {"chief": {}, "worker": {}}, "restart": {"policy": "never"}}))
    status = Supervisor(plan, runtime, tuning=Tuning(poll_seconds=0.01, linger_seconds=0.0)).run()
    last = {t.name: t.last_line for t in status.tasks}
    assert last == {"job-chief-0": "loss 0.5", "job-worker-0": "ValueError: bad shape"}
    assert "last error: ValueError: bad shape" in status.message
