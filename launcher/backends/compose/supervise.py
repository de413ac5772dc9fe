"""The compose cluster's part of the supervisor process (``launcher.supervision.harness``).

Contract: ``host`` gives the harness the cluster's containers as the runtime;
the state dir also holds the compose files and ``compose-command.json``
(which ``docker compose`` command ``submit`` found). Adopting, it takes over
the containers of a supervisor that died.
"""

from __future__ import annotations

import json

from launcher.backends.compose.runtime import ContainerRuntime
from launcher.backends.image_build import docker_client
from launcher.plan.planner import Plan
from launcher.supervision import harness

COMPOSE_COMMAND_FILE = "compose-command.json"


def host(plan: Plan, state: harness.StateDir, adopt: bool) -> harness.Hosted:
    compose = json.loads((state.root / COMPOSE_COMMAND_FILE).read_text())
    runtime = ContainerRuntime(docker_client(), compose, state.root, plan.event_token)
    return harness.Hosted(plan, runtime)
