#!/usr/bin/env bash
# Stop a box started by hack/local-up.sh: kills every process group it started and removes
# its directory (certificates, etcd data, logs).
#
#   hack/local-down.sh [--name NAME] [--all]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [[ -n "${PYTHON:-}" ]]; then PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then PY="$ROOT/.venv/bin/python"
else PY=python3; fi
exec "$PY" -m hack.localbox down "$@"
