"""``python -m launcher.backends.supervisor_process ...``: the supervisor process (``main.main``).

A supervisor that left its tasks to the next one (143: its pod moved) ends at once, its output flushed: the
runtime's log followers (daemon threads) must not meet the interpreter's shutdown, which can abort the process
(134, "could not acquire lock for <stderr>") when one of them holds stderr, and a pod's Job counts that as a failure.
"""

import os
import sys

from launcher.backends.supervisor_process.main import main
from launcher.supervision.harness import LEFT_EXIT

code = main()
if code == LEFT_EXIT:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
