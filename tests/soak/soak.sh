#!/usr/bin/env bash
# The soak (tests/soak/soak.py): `ditto serve` on loopback under 64 clients for 10 minutes with aborts,
# disconnects, oversized and malformed requests mixed in; fails when a request is lost, a repeated
# request's answer changes, or the server's memory is not back within 10 % of its warm baseline.
# Stops by itself. Usage: tests/soak/soak.sh [soak.py flags]
# Environment: SOAK_SECONDS (600), SOAK_CLIENTS (64), MODEL (the demo GGUF), DITTO_BIN, REPORT
# (a JSON report file, default build/soak-report.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
DITTO_BIN=${DITTO_BIN:-build/tools/ditto}
[[ -x $DITTO_BIN ]] || make build
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
exec /usr/bin/python3 tests/soak/soak.py --ditto "$DITTO_BIN" --model "$MODEL" --seconds "${SOAK_SECONDS:-600}" \
  --clients "${SOAK_CLIENTS:-64}" --report "${REPORT:-build/soak-report.json}" "$@"
