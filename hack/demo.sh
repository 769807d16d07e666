#!/usr/bin/env bash
# The README's main job (`make demo` runs it after building what is missing): elastic scaling live
# on the local control plane, then `volcano-elastic plan` and `simulate` on the bundled examples.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" -m hack.demo "$@"
