"""Every relative link in README.md and docs/*.md points to a file that exists, and to a heading in it when it names one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+ (.*)")


def _outside_fences(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    headings = (match.group(1) for line in _outside_fences(page.read_text()) if (match := HEADING.match(line)))
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def _relative_links(page: Path) -> list[str]:
    links = (link for line in _outside_fences(page.read_text()) for link in LINK.findall(line))
    return [link for link in links if not re.match(r"^[a-z]+:", link)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in _relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no file {target.relative_to(REPO) if target.is_relative_to(REPO) else target}")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.name}")
    assert broken == [], f"{page.relative_to(REPO)}: broken links"


def test_the_docs_pages_are_linked_from_the_readme() -> None:
    linked = {link.partition("#")[0] for link in _relative_links(REPO / "README.md")}
    assert {f"docs/{page.name}" for page in PAGES[1:]} <= linked
