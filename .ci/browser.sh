#!/usr/bin/env bash
# Make the browser tests' browser ready (called by scripts/test.sh under CI): Debian's chromium
# (/usr/bin/chromium), which Playwright (the test extra) drives; Playwright fetches no browser of its own.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
    echo "browser.sh: installing chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
dpkg-query -W -f 'browser.sh: chromium ${Version}\n' chromium
