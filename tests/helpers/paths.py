"""Where the repository's files are, for tests wherever they live in the tree."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
