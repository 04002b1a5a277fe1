#!/usr/bin/env bash
# Fails when web/dist (committed; the ditto binary embeds it) is not what web/src builds to now:
# type-checks, builds into a temporary folder with the pinned toolchain, and compares file by file.
# Fix: `make web`, then commit web/dist.
set -euo pipefail
cd "$(dirname "$0")"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
npx --no-install tsc --noEmit
npx --no-install vite build --logLevel error --outDir "$out" --emptyOutDir
if ! diff -r "$out" dist >/dev/null; then
  diff -r "$out" dist | head -20 >&2 || true
  echo "web/dist is stale: web/src builds to other files. Run 'make web' and commit web/dist." >&2
  exit 1
fi
echo "web/dist is what web/src builds to ($(find dist -type f | wc -l) files)"
