"""tfcluster: plan, launch and supervise multi-worker TensorFlow training clusters."""

__version__ = "0.1.0"
