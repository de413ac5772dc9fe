"""The suite's lanes: which tests may run at the same time, in two processes (pytest-xdist), and in what order.

Contract: ``scripts/test.sh`` runs pytest with ``--numprocesses 2 --dist loadgroup --no-loadscope-reorder``
(``TFCLUSTER_TEST_PROCESSES=0``: one process). Every test gets one ``xdist_group``, its lane (``lane``): the ``e2e``
tests one lane (they share the real cluster's namespace, its volumes and its one node), the ``slurm`` tests one (the
three-node cluster), the ``docker`` tests one (one engine, its registry and images), every other test its module's
(a module's fixtures are made once, its tests run in the order they are written). xdist gives a lane whole to one
process, which runs its tests one after another; two lanes may run at once, so a test of one lane never depends on
what another lane leaves or does. Both processes collect the suite, and xdist refuses a run whose two collections
differ: a test's parameters (and so its id) are never random.

Order (``ordered``): in one process the e2e tests run last, since their cluster starts in the background
(scripts/test.sh) while the rest runs. Under xdist their lane comes first, so one process takes it at once and waits
there for the cluster while the other runs the rest. Then come the docker lane and the slurm lane (the longest
after it: a long lane taken late would end the run alone), then the modules in the order collected.
A pytest plugin (tests/conftest.py loads it).
"""

from __future__ import annotations

import pytest

#: The lanes of whole test groups, in the order a distributed run takes them; other tests' lanes are their modules.
GROUP_LANES = ("e2e", "docker", "slurm")


def lane(item: pytest.Item) -> str:
    """The test's lane: its first group of ``GROUP_LANES`` that marks it, else its module's path."""
    return next((group for group in GROUP_LANES if item.get_closest_marker(group)), item.nodeid.partition("::")[0])


def without_lane(nodeid: str) -> str:
    """``nodeid`` as collected: xdist's loadgroup adds ``@<lane>`` to a grouped test's id (after any parameters)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def distributed(config: pytest.Config) -> bool:
    """Whether this process is one of a distributed run's workers (they collect; the controller only schedules)."""
    return hasattr(config, "workerinput")


def ordered(items: list[pytest.Item], first: bool) -> list[pytest.Item]:
    """``items`` ordered by lane: the e2e lane first (``first``: a distributed run) or last, the lanes of
    ``GROUP_LANES`` together in that order, the other tests as collected; stable within a lane."""
    def rank(item: pytest.Item) -> int:
        name = lane(item)
        if name == "e2e" and not first:
            return len(GROUP_LANES) + 1
        return GROUP_LANES.index(name) if name in GROUP_LANES else len(GROUP_LANES)

    return sorted(items, key=rank)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(lane(item)))
    items[:] = ordered(items, first=distributed(config))
