#!/usr/bin/env bash
# The kubectl built by hack/build-binaries.sh (same version as the box's API server).
# Uses $KUBECONFIG when set, else the kubeconfig of box ${VOLCANO_ELASTIC_BOX:-default}.
#   hack/kubectl.sh get nodes
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/hack/python.sh"
read -r BIN BOXES < <(cd "$ROOT" && "$PY" -c 'from hack.localbox import paths; print(paths.bin_dir(), paths.boxes_dir())')
if [[ ! -x "$BIN/kubectl" ]]; then
  echo "kubectl.sh: $BIN/kubectl is missing; run: bash hack/build-binaries.sh" >&2; exit 1
fi
if [[ -z "${KUBECONFIG:-}" ]]; then
  export KUBECONFIG="$BOXES/${VOLCANO_ELASTIC_BOX:-default}/kubeconfig"
  [[ -f "$KUBECONFIG" ]] || { echo "kubectl.sh: no box ${VOLCANO_ELASTIC_BOX:-default} ($KUBECONFIG); start one with hack/local-up.sh" >&2; exit 1; }
fi
exec "$BIN/kubectl" "$@"
