"""``python -m launcher.worker``: the shared entrypoint of every task (see ``launcher.worker``)."""

import os
import sys

# tf_keras, not Keras 3 (which cannot fit() under MWMS/PSS): must be set before TensorFlow is imported.
from launcher.protocol import env  # noqa: E402  (imports no TensorFlow)

os.environ.setdefault(env.LEGACY_KERAS, "1")

from launcher.worker.main import main  # noqa: E402  (TensorFlow is imported from here on)

code = main()
sys.stdout.flush()
sys.stderr.flush()
# Skip interpreter teardown: TensorFlow's gRPC shutdown can abort (SIGABRT, 134) after a
# failed PSS run, which would replace the exit code the restart policy must see.
os._exit(code)
