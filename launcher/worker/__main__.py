"""``python -m launcher.worker``: the shared entrypoint of every task (see ``launcher.worker``)."""

import os
import sys

# tf_keras, not Keras 3 (which cannot fit() under MWMS/PSS): must be set before TensorFlow is imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from launcher.worker.main import main  # noqa: E402  (TensorFlow is imported from here on)

sys.exit(main())
