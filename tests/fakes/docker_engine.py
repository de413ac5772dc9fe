"""A Docker client holding one container (``client.containers.get(name)``), for the compose runtime's unit tests:
any other name is ``docker.errors.NotFound``, as the engine says it."""

from __future__ import annotations

from typing import Any

import docker.errors


class OneContainer:
    def __init__(self, container: Any):
        self.container, self.containers = container, self

    def get(self, name: str) -> Any:
        if name != self.container.name:
            raise docker.errors.NotFound(f"No such container: {name}")
        return self.container
