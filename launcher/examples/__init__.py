"""Example training modules for the shared entrypoint (``training.module``)."""
