#!/usr/bin/env bash
# Start the control plane in a box: etcd, kube-apiserver, kube-controller-manager, the CRDs,
# Volcano (scheduler + controllers), kwok GPU nodes and the Kubeflow training operator, all
# on 127.0.0.1, each with its own log file. Builds missing binaries first (cached).
#
#   hack/local-up.sh [--nodes N] [--gpus-per-node G] [--volcano-conf ours|native|capacity|capacity-hierarchy|FILE]
#                    [--name NAME] [--profile full|core] [--keep-on-failure] [--timeout S]
#                    [--real-nodes N [--real-node-gpus G] [--real-node-image OCI_ARCHIVE ...]]
#
# --real-nodes N (default 0: the box is unchanged) adds N real nodes beside the kwok ones: a
# kubelet with its own containerd each, bridge networking and CoreDNS; pods on them really run.
# Needs root, writable cgroups and overlayfs; the runtime comes from Debian's archive at the
# versions pinned in hack/versions.env (hack/install-node-packages.sh, run for you if missing).
#
# The last line printed (stdout) is the path of the admin kubeconfig:
#   export KUBECONFIG=$(hack/local-up.sh | tail -n1)
# A second run with the same options reuses the running box; with other options it refuses.
# Stop with hack/local-down.sh [--name NAME]. Env: VOLCANO_ELASTIC_CACHE (cache root),
# VOLCANO_ELASTIC_BOX (default box name), VOLCANO_ELASTIC_KEEP_BOX=1 (keep a failed box).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source "$ROOT/hack/python.sh"

for a in "$@"; do
  case "$a" in -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exec "$PY" -m hack.localbox up --help ;; esac
done

missing="$("$PY" -c 'from hack.localbox import paths; print(" ".join(paths.missing_binaries()))')"
if [[ -n "$missing" ]]; then
  echo "local-up: building missing binaries: $missing" >&2
  bash "$ROOT/hack/build-binaries.sh" >&2
fi
for a in "$@"; do
  case "$a" in --real-nodes|--real-nodes=*) bash "$ROOT/hack/install-node-packages.sh" >&2; break ;; esac
done
exec "$PY" -m hack.localbox up "$@"
