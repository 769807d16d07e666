#!/usr/bin/env bash
# Install what the box's real nodes run on, from Debian's archive, at the versions pinned in
# hack/versions.env: containerd, runc, the CNI plugins (bridge, host-local, loopback, portmap;
# they pull iptables), conntrack, mmdebstrap and buildah (our image: the Dockerfile, built by buildah
# on a Python base that mmdebstrap makes; hack/localbox/dockerfile.py), and python3-torch (CPU;
# tests/real/test_inplace_resize.py runs torch processes on the host).
# Then torch 2.x from PyPI for the real tier's training pods (hack/install-torch2.sh: cached in
# ~/.cache/volcano-elastic/torch, about 3 GB downloaded once; no root needed for that part).
# Idempotent: packages already at their pinned version are left alone. Needs root and apt.
#
#   sudo bash hack/install-node-packages.sh [--check]
#
# --check installs nothing: exit 0 when everything is there at its pinned version, else 1 and
# the list of what is missing.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
torch2() {  # the project's venv's pip when there is one (make venv), else python3's
  local venv="$HACK_DIR/../.venv/bin/python"
  if [[ -z "${PIP:-}" && -x "$venv" ]]; then PIP="$venv -m pip" bash "$HACK_DIR/install-torch2.sh" "$@"
  else bash "$HACK_DIR/install-torch2.sh" "$@"; fi
}
eval "$(grep -E '^(CONTAINERD|RUNC|CNI_PLUGINS)_DEB_VERSION=' "$HACK_DIR/versions.env")"
WANT=("containerd=$CONTAINERD_DEB_VERSION" "runc=$RUNC_DEB_VERSION"
      "containernetworking-plugins=$CNI_PLUGINS_DEB_VERSION" conntrack iptables mmdebstrap buildah uidmap python3-torch)
need=()
for w in "${WANT[@]}"; do
  pkg="${w%%=*}"; ver=""; [[ "$w" == *=* ]] && ver="${w#*=}"
  have="$(dpkg-query -W -f='${Status} ${Version}' "$pkg" 2>/dev/null || true)"
  if [[ "$have" != "install ok installed"* ]] || [[ -n "$ver" && "${have##* }" != "$ver" ]]; then
    need+=("$w")
  fi
done
if [[ "${1:-}" == "--check" ]]; then
  torch2_ok=0; torch2 --check || torch2_ok=1
  if [[ ${#need[@]} -ne 0 ]]; then
    echo "install-node-packages: missing or at another version: ${need[*]}" >&2; exit 1
  fi
  exit "$torch2_ok"
fi
if [[ ${#need[@]} -eq 0 ]]; then
  echo "install-node-packages: all present (${WANT[*]})"; torch2; exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-node-packages: needs root to install ${need[*]} (the real-node tier skips without them)" >&2; exit 1
fi
echo "install-node-packages: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
torch2
