"""Placeholder: this backend is being built."""

from launcher.plan import Plan


def render(plan: Plan) -> dict[str, str]:
    return {}


def create(**options):
    raise NotImplementedError("backend not built yet")
