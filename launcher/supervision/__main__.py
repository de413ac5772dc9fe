"""``python -m launcher.supervision MODULE:CLASS DIR [--adopt]``: the supervisor process (``harness.main``)."""

import sys

from launcher.supervision import harness

sys.exit(harness.main())
