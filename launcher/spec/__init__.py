"""The cluster spec layer: typed models, byte quantities, cross-field checks (``cross_checks``), and YAML loading with located problems.

Imports nothing of tfcluster above it (only ``launcher.errors``).
"""
