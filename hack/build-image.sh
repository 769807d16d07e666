#!/usr/bin/env bash
# Build one of the box's images as an OCI archive, without Docker or a registry, cached under
# ${VOLCANO_ELASTIC_CACHE:-~/.cache/volcano-elastic}/images/ by the hash of what goes into it.
#
#   hack/build-image.sh [pause | volcano-elastic | train | python-base]      (default volcano-elastic)
#
# volcano-elastic: the Dockerfile itself, built by buildah on a Python base image that mmdebstrap
# makes from Debian bookworm (python-base; hack/localbox/dockerfile.py, the recipe of `make dist`);
# train: Debian's CPU-only python3-torch plus the job kit, for the real-node tier. Needs root,
# mmdebstrap and buildah (hack/install-node-packages.sh). The last line printed is the archive's path; load it with
#   ctr -n k8s.io images import ARCHIVE   (or hack/local-up.sh --real-node-image ARCHIVE)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source "$ROOT/hack/python.sh"
export PYTHON="$PY"
exec "$PY" -c 'import sys; from hack.localbox.dockerfile import main; sys.exit(main(sys.argv[1:]))' "$@"
