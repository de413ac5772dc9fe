"""``python -m launcher.backends.supervisor_process ...``: the supervisor process (``main.main``)."""

import sys

from launcher.backends.supervisor_process.main import main

sys.exit(main())
