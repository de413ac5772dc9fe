"""A real headless browser for the tests: Debian's Chromium (/usr/bin/chromium), driven by Playwright.

``open_page(url, screenshot)`` opens ``url`` in a fresh Chromium (a new empty profile, the flags that work on
a closed network: no background networking, no component updates, no sync, no QUIC), waits until it is
loaded, saves a full-page screenshot to ``screenshot`` and yields a ``Visit``: the page, every console error
and page error, and every request the page made (its own URL included). Chromium or Playwright missing:
``unavailable`` in the ``browser`` group (a failure under CI, which installs both: .ci/browser.sh).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.required import require_module, unavailable

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@dataclass
class Visit:
    page: Any
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@contextmanager
def open_page(url: str, screenshot: Path) -> Iterator[Visit]:
    sync_api = require_module("playwright.sync_api", "browser")
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (apt-get install chromium; .ci/browser.sh)", "browser")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                                                                viewport={"width": 1100, "height": 900})
        try:
            page = context.new_page()
            visit = Visit(page)
            page.on("console", lambda message: visit.errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: visit.errors.append(str(error)))
            page.on("request", lambda request: visit.requests.append(request.url))
            page.goto(url, wait_until="load")
            page.screenshot(path=str(screenshot), full_page=True)
            yield visit
        finally:
            context.close()
