#!/usr/bin/env bash
# Dashboard test in a real headless browser: installs Chromium and its
# WebDriver from Debian, Selenium into a virtualenv under target/, builds
# the server, then runs scripts/browser_test.py (page loads without console
# errors, the queue list shows a queue the test created, pausing from the
# UI makes ADDJOB answer PAUSED, auth is enforced) and refreshes the
# screenshots in docs/. Fails loudly when anything cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "browser-test: chromium/chromedriver missing and not root: cannot apt-get install" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver python3-venv >/dev/null
fi
command -v chromium >/dev/null || { echo "browser-test: chromium not installed" >&2; exit 1; }
command -v chromedriver >/dev/null || { echo "browser-test: chromedriver not installed" >&2; exit 1; }

VENV=target/browser-venv
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" || {
        echo "browser-test: python3 -m venv failed (apt-get install python3-venv)" >&2
        exit 1
    }
fi
"$VENV/bin/python" -c 'import selenium' 2>/dev/null || "$VENV/bin/pip" install -q 'selenium>=4.20,<5'

cargo build --bin disque-server
exec "$VENV/bin/python" scripts/browser_test.py target/debug/disque-server "${@}"
