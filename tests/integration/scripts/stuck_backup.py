"""A training module (the bundled digits) whose chief's backup write never lands, once.

TensorFlow records a checkpoint in its manager's state file in a callback that
runs once the checkpoint's files are written (``checkpoint._execute_callbacks``).
On the chief, while ``marker`` does not exist, this module makes the backup write
numbered ``stuck_backup`` (1-based) stop right there: its files are on disk, not
yet recorded, and the write never ends (as a task killed mid-write leaves it).
It creates ``marker`` with the checkpoint's path when it stops. A restarted
attempt finds the marker and writes normally.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from tensorflow.python.checkpoint import checkpoint as tf_checkpoint

from launcher.examples import mnist

build_model = mnist.build_model
make_eval_dataset = mnist.make_eval_dataset
_write_callbacks = tf_checkpoint._execute_callbacks
_backups = [0]


def _is_chief() -> bool:
    return json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {}).get("type") == "chief"


def make_dataset(input_context: Any, global_batch_size: int, marker: str = "", stuck_backup: int = 2,
                 **args: Any) -> Any:
    if marker and _is_chief() and not os.path.exists(marker):
        def execute_callbacks(callbacks: Any, save_path: str) -> None:
            if "/backup/chief/" in save_path:
                _backups[0] += 1
                if _backups[0] == stuck_backup:
                    with open(marker, "w") as file:
                        file.write(save_path + "\n")
                    threading.Event().wait()  # forever: the write thread never records it
            _write_callbacks(callbacks, save_path)

        tf_checkpoint._execute_callbacks = execute_callbacks
    return mnist.make_dataset(input_context, global_batch_size, **args)
