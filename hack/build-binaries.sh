#!/usr/bin/env bash
# Build the control-plane-in-a-box binaries from the Go module proxy.
#
#   hack/build-binaries.sh [--force] [--allow-failures] [NAME ...]
#
# NAME is any of: etcd kube-apiserver kube-controller-manager kubectl vc-scheduler
# vc-controller-manager kwok training-operator (default: all of them).
#
# Output: ${VOLCANO_ELASTIC_CACHE:-$HOME/.cache/volcano-elastic}/<key>/bin/<name>, where <key>
# is derived from hack/versions.env (so a version bump builds a fresh set), plus the CRDs the
# box installs under <key>/crds/ and one build log per binary under <key>/logs/.
# Already-built binaries are skipped (idempotent). Binaries are built one after another with
# `go build -p 2`; the Go build cache shares the Kubernetes packages between the k8s and
# Volcano builds. Exit status: 0 when everything is built, 1 when any build failed (the
# others are still built, and each failure names its module and shows the Go error);
# --allow-failures exits 0 anyway (the pytest fixtures then skip, loudly, the tiers whose
# binaries are missing). --force rebuilds what exists.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"

CACHE_ROOT="${VOLCANO_ELASTIC_CACHE:-$HOME/.cache/volcano-elastic}"
# Same rule as hack/localbox/paths.py: "v-" + first 12 hex digits of the sha256 of the
# KEY=value lines of versions.env (comments do not change the key).
KEY="v-$(grep -E '^[A-Z0-9_]+=' "$HACK_DIR/versions.env" | sha256sum | cut -c1-12)"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"
LOGS="$OUT/logs"
CRDS="$OUT/crds"
mkdir -p "$BIN" "$LOGS" "$CRDS"
cp "$HACK_DIR/versions.env" "$OUT/versions.env"

FORCE=0
ALLOW_FAILURES=0
WANT=()
for a in "$@"; do
  case "$a" in
    --force) FORCE=1 ;;
    --allow-failures) ALLOW_FAILURES=1 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "build-binaries: unknown option $a" >&2; exit 2 ;;
    *) WANT+=("$a") ;;
  esac
done

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false"
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"

if ! command -v go >/dev/null 2>&1; then
  echo "build-binaries: 'go' is not on PATH; a Go >= 1.26 toolchain is needed" >&2
  exit 1
fi

ts() { date -u +%H:%M:%S; }
log() { echo "[build-binaries $(ts)] $*"; }

BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
k8s_ldflags() {
  local v="$KUBERNETES_VERSION" major minor rest
  rest="${v#v}"; major="${rest%%.*}"; rest="${rest#*.}"; minor="${rest%%.*}"
  local f="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    f+=" -X $p.gitTreeState=clean -X $p.buildDate=$BUILD_DATE"
  done
  echo "$f"
}
helm_ldflags() {  # what helm's Makefile stamps: its version, and the Kubernetes version of its client-go
  local minor
  minor="$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$HACK_DIR/gomod/helm/go.mod" | head -n1)"
  local f="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" p
  for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    f+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=${minor:-20}"
  done
  echo "$f"
}
volcano_ldflags() {
  echo "-s -w -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION -X volcano.sh/volcano/pkg/version.Built=$BUILD_DATE"
}

# name | wrapper dir | main package | module@version (for messages + consistency check) | ldflags fn
TARGETS=(
  "etcd|etcd|go.etcd.io/etcd/server/v3|go.etcd.io/etcd/server/v3@$ETCD_VERSION|plain"
  "kube-apiserver|kubernetes|k8s.io/kubernetes/cmd/kube-apiserver|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s"
  "kube-controller-manager|kubernetes|k8s.io/kubernetes/cmd/kube-controller-manager|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s"
  "kubectl|kubernetes|k8s.io/kubernetes/cmd/kubectl|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s"
  "vc-scheduler|volcano|volcano.sh/volcano/cmd/scheduler|volcano.sh/volcano@$VOLCANO_VERSION|volcano"
  "vc-controller-manager|volcano|volcano.sh/volcano/cmd/controller-manager|volcano.sh/volcano@$VOLCANO_VERSION|volcano"
  "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|sigs.k8s.io/kwok@$KWOK_VERSION|plain"
  "training-operator|training-operator|github.com/kubeflow/training-operator/cmd/training-operator.v1|github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION|plain"
  "helm|helm|helm.sh/helm/v3/cmd/helm|helm.sh/helm/v3@$HELM_VERSION|helm"
)

wanted() {
  [[ ${#WANT[@]} -eq 0 ]] && return 0
  local w; for w in "${WANT[@]}"; do [[ "$w" == "$1" ]] && return 0; done
  return 1
}

# The wrapper go.mod must require exactly the pinned version (else versions.env lies).
check_pin() {
  local dir="$1" modver="$2" mod ver
  mod="${modver%@*}"; ver="${modver##*@}"
  if ! grep -Eq "^[[:space:]]*(require[[:space:]]+)?${mod//./\\.}[[:space:]]+${ver//./\\.}([[:space:]]|$)" "$HACK_DIR/gomod/$dir/go.mod"; then
    echo "build-binaries: hack/gomod/$dir/go.mod does not require $mod $ver as hack/versions.env says;" >&2
    echo "  fix it with: (cd hack/gomod/$dir && go get -tool <main package>@$ver)" >&2
    return 1
  fi
}

FAILED=()
TOTAL_START=$(date +%s)
log "cache: $OUT ($(go version | awk '{print $3}'), GOCACHE=$(go env GOCACHE))"
for t in "${TARGETS[@]}"; do
  IFS='|' read -r name dir pkg modver ldkind <<<"$t"
  wanted "$name" || continue
  if [[ -x "$BIN/$name" && $FORCE -eq 0 ]]; then
    log "$name: already built ($BIN/$name)"
    continue
  fi
  if ! check_pin "$dir" "$modver"; then FAILED+=("$name"); continue; fi
  case "$ldkind" in
    k8s) ldflags="$(k8s_ldflags)" ;;
    volcano) ldflags="$(volcano_ldflags)" ;;
    helm) ldflags="$(helm_ldflags)" ;;
    *) ldflags="-s -w" ;;
  esac
  blog="$LOGS/build-$name.log"
  log "$name: building $pkg from $modver (log: $blog) ..."
  s=$(date +%s)
  if (cd "$HACK_DIR/gomod/$dir" && go build -p 2 -trimpath -ldflags "$ldflags" -o "$BIN/.$name.tmp" "$pkg") >"$blog" 2>&1; then
    mv -f "$BIN/.$name.tmp" "$BIN/$name"
    log "$name: built in $(( $(date +%s) - s ))s ($(du -h "$BIN/$name" | cut -f1))"
  else
    rm -f "$BIN/.$name.tmp"
    echo "[build-binaries $(ts)] FAILED: $name from module $modver (package $pkg, wrapper hack/gomod/$dir) after $(( $(date +%s) - s ))s. Go said:" >&2
    tail -n 40 "$blog" | sed 's/^/    /' >&2
    FAILED+=("$name")
  fi
done

# CRDs come from the same module downloads.
copy_crds() {
  local dir="$1" mod="$2" dest="$3"; shift 3
  local src
  src="$(cd "$HACK_DIR/gomod/$dir" && go list -m -f '{{.Dir}}' "$mod" 2>/dev/null || true)"
  if [[ -z "$src" || ! -d "$src" ]]; then
    src="$(cd "$HACK_DIR/gomod/$dir" && go mod download -json "$mod" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  fi
  if [[ -z "$src" || ! -d "$src" ]]; then
    echo "build-binaries: FAILED to locate module $mod for its CRDs" >&2
    FAILED+=("crds:$mod"); return
  fi
  mkdir -p "$dest"
  local f
  if [[ "$1" == */ ]]; then  # a whole folder of YAML files
    set -- $(cd "$src" && ls "$1"*.yaml)
  fi
  for f in "$@"; do
    if [[ -f "$src/$f" ]]; then install -m 0644 "$src/$f" "$dest/"; else
      echo "build-binaries: FAILED: $mod has no $f" >&2; FAILED+=("crds:$f"); fi
  done
}
if [[ ${#WANT[@]} -eq 0 ]]; then
  # every CRD of config/crd/volcano/bases (podgroups, queues, hypernodes, numatopologies,
  # jobs, commands, ...): the scheduler and controllers wait for their informers
  copy_crds volcano volcano.sh/volcano "$CRDS/volcano" config/crd/volcano/bases/
  copy_crds training-operator github.com/kubeflow/training-operator "$CRDS/training-operator" \
    manifests/base/crds/kubeflow.org_pytorchjobs.yaml
  # kwok has no built-in stages: node-initialize/heartbeat keep nodes Ready, pod-ready marks
  # bound pods Running, pod-delete finishes deletions, pod-complete completes Job pods
  KS=kustomize/stage
  copy_crds kwok sigs.k8s.io/kwok "$OUT/kwok-stages" \
    $KS/node/fast/node-initialize.yaml $KS/node/heartbeat/node-heartbeat.yaml \
    $KS/pod/fast/pod-ready.yaml $KS/pod/fast/pod-complete.yaml $KS/pod/fast/pod-delete.yaml
  log "CRDs in $CRDS, kwok stages in $OUT/kwok-stages"
fi

log "done in $(( $(date +%s) - TOTAL_START ))s; binaries in $BIN"
if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "[build-binaries $(ts)] FAILED: ${FAILED[*]} (logs in $LOGS)" >&2
  [[ $ALLOW_FAILURES -eq 1 ]] && exit 0
  exit 1
fi
