"""The local backend: every task is a process on this machine, on loopback ports."""

from __future__ import annotations
