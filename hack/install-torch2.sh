#!/usr/bin/env bash
# torch 2.x from PyPI for the real tier's training pods (issue 39): the real nodes' pods mount this
# directory from the host (hostPath, read-only) and put it first on PYTHONPATH, over the training
# image's Debian python3-torch 1.13. PyPI's Linux torch wheel is built for CUDA: `import torch`
# loads the CUDA libraries even on a CPU (no wheel without them is on PyPI), so the nvidia-*,
# cuda-* and triton wheels come too (about 3 GB downloaded, 5 GB installed).
# Installed with `pip install --target` for CPython 3.11 on manylinux x86_64 (the image's Python,
# Debian bookworm's 3.11), whatever Python runs pip. Cached in
# ${VOLCANO_ELASTIC_CACHE:-~/.cache/volcano-elastic}/torch/pypi-<version>; a complete install has
# .complete (and .install-seconds: what the download and install took; 414 s for 2.15.0, 5,397 MiB
# installed, on a shared 2-vCPU machine). Idempotent.
#
#   bash hack/install-torch2.sh [--check] [--print-dir]
#
# --check installs nothing: exit 0 when the directory is complete, else 1.
# --print-dir prints the directory (installed or not) and exits.
# TORCH2_VERSION (default below) picks the version; PIP the pip to run (default: python3 -m pip).
set -euo pipefail
VERSION="${TORCH2_VERSION:-2.15.0}"
CACHE="${VOLCANO_ELASTIC_CACHE:-$HOME/.cache/volcano-elastic}"
DEST="$CACHE/torch/pypi-$VERSION"
case "${1:-}" in
  --print-dir) echo "$DEST"; exit 0 ;;
  --check) [[ -f "$DEST/.complete" ]] && exit 0
           echo "install-torch2: torch $VERSION is not installed in $DEST" >&2; exit 1 ;;
  "") ;;
  *) echo "usage: bash hack/install-torch2.sh [--check|--print-dir]" >&2; exit 2 ;;
esac
if [[ -f "$DEST/.complete" ]]; then
  echo "install-torch2: torch $VERSION present ($DEST)"; exit 0
fi
read -r -a PIP_CMD <<< "${PIP:-python3 -m pip}"
partial="$DEST.partial"
rm -rf "$partial"
mkdir -p "$partial"
echo "install-torch2: installing torch $VERSION (PyPI, with its CUDA wheels) into $DEST"
start=$(date +%s)
platforms=(--platform manylinux2014_x86_64 --platform linux_x86_64)
for minor in $(seq 5 36); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done  # bookworm: glibc 2.36
"${PIP_CMD[@]}" install --quiet --disable-pip-version-check --no-input --no-cache-dir --target "$partial" \
  --python-version 3.11 --implementation cp --abi cp311 "${platforms[@]}" --only-binary=:all: "torch==$VERSION"
seconds=$(( $(date +%s) - start ))
chmod -R a+rX "$partial"
echo "$seconds" > "$partial/.install-seconds"
du -sm "$partial" | cut -f1 > "$partial/.install-mib"
touch "$partial/.complete"
rm -rf "$DEST"
mv "$partial" "$DEST"
echo "install-torch2: torch $VERSION installed in ${seconds}s ($(cat "$DEST/.install-mib") MiB): $DEST"
