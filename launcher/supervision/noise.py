"""TensorFlow's C++ log noise, which a task's last line skips.

Contract: ``is_noise(line)`` is True for the lines TensorFlow's native code
writes through absl on every start, whatever the program does
(``I0000 00:00:1795465561.475645   17644 port.cc:153] oneDNN ...``, the
``E0000 ... cuda_platform.cc:52] failed call to cuInit`` of every machine
without a GPU, ``W...`` lines, the dated ``2026-11-23 20:00:00.123456: I
tensorflow/...`` form of older builds, the ``WARNING: All log messages before
absl::InitializeLog()`` banner and the CPU-feature notice's second line).
Fatal (``F...``) lines and everything else are kept: they say why a task died.
"""

from __future__ import annotations

import re

_NOISE = re.compile(
    r"[IWE]\d{4} [\d:.]+\s+\d+ \S+:\d+\] "                      # absl: I0000 00:00:1795465561.47 17644 port.cc:153]
    r"|\d{4}-\d\d-\d\d [\d:.]+: [IWE] \S+:\d+\] "                 # TensorFlow < 2.18: 2026-11-23 20:00:00.1: I tf/...:1]
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$"
)


def is_noise(line: str) -> bool:
    """Whether ``line`` is TensorFlow's native log noise rather than the task's own output."""
    return _NOISE.match(line.strip()) is not None
