#!/usr/bin/env bash
# Stop a box started by hack/local-up.sh: kills every process group it started and removes
# its directory (certificates, etcd data, logs).
#
#   hack/local-down.sh [--name NAME] [--all]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source "$ROOT/hack/python.sh"
exec "$PY" -m hack.localbox down "$@"
