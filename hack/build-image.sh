#!/usr/bin/env bash
# Build one of the box's images as an OCI archive, without Docker or a registry, cached under
# ${VOLCANO_ELASTIC_CACHE:-~/.cache/volcano-elastic}/images/ by the hash of what goes into it.
#
#   hack/build-image.sh [pause | volcano-elastic | train]      (default volcano-elastic)
#
# volcano-elastic: what the Dockerfile builds (our wheel + requirements-image.txt in /opt/venv,
# user 65532, ENTRYPOINT volcano-elastic) on Debian bookworm from mmdebstrap; train: Debian's
# CPU-only python3-torch plus the job kit, for the real-node tier. Needs root and mmdebstrap
# (hack/install-node-packages.sh). The last line printed is the archive's path; load it with
#   ctr -n k8s.io images import ARCHIVE   (or hack/local-up.sh --real-node-image ARCHIVE)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source "$ROOT/hack/python.sh"
export PYTHON="$PY"
exec "$PY" -c 'import sys; from hack.localbox.image import main; sys.exit(main(sys.argv[1:]))' "$@"
