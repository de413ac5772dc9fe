"""Small JSON state files shared between a backend's supervisor process and the CLI in other shells.

Contract: ``write_json`` replaces the file atomically, so a reader in another
process never sees half a file; ``read_json`` returns None for a file that
is missing or not (yet) valid JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any) -> None:
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(data))
    os.replace(partial, path)


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
