#!/usr/bin/env bash
# The pinned TypeScript compiler for tests/gateway/test_web_compiled.py, which fails when the checked-in
# services/gateway/rag_gateway/static/js is not what it compiles from services/gateway/web/src.
# Runs `npm ci` in services/gateway/web when its node_modules was not installed from the current
# package-lock.json (a stamp of the lock's hash, as scripts/bootstrap.sh keeps for .venv); does nothing
# otherwise. Without node/npm it only warns: the test then fails and says what is missing.
set -euo pipefail
cd "$(dirname "$0")/../services/gateway/web"
STAMP=node_modules/.rag-lock-stamp
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "==> node and npm not found: tests/gateway/test_web_compiled.py will fail (install Node.js 20 and npm)" >&2
  exit 0
fi
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -x node_modules/.bin/tsc && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi
echo "==> installing the pinned TypeScript compiler (npm ci in services/gateway/web)"
npm ci --no-audit --no-fund --loglevel=error
echo "$want" > "$STAMP"
