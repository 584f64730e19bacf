#!/usr/bin/env bash
# The browser tests (tests/e2e/test_web_ui.py, tests/gateway/test_web_oidc.py) drive Debian's Chromium
# through Playwright; Playwright's own browser download cannot work on machines without internet.
# Installs the `chromium` package when it is missing (root, or sudo); does nothing otherwise.
set -euo pipefail
CHROMIUM=${RAG_CHROMIUM:-/usr/bin/chromium}
[[ -x "$CHROMIUM" ]] && exit 0
SUDO=""
if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
echo "==> installing Debian's chromium for the browser tests"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
