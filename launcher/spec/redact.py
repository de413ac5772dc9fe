"""What of a spec may be shown or kept outside the run: its ``env`` values hidden (they may hold secrets).

Contract: ``without_env_values(document)`` is a spec's JSON document (``ClusterSpec.model_dump(mode="json")``)
with every ``env`` mapping's values replaced by ``HIDDEN`` and its names kept; pure, still a valid spec.
"""

from __future__ import annotations

from typing import Any

#: What an ``env`` value is shown (and kept) as.
HIDDEN = "(hidden)"


def without_env_values(value: Any) -> Any:
    """``value`` with every ``env`` mapping's values hidden (its names kept)."""
    if isinstance(value, dict):
        return {key: ({name: HIDDEN for name in item} if key == "env" and isinstance(item, dict)
                      else without_env_values(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [without_env_values(item) for item in value]
    return value
