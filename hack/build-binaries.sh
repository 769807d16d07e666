#!/usr/bin/env bash
# Build the control-plane-in-a-box binaries from the Go module proxy.
#
#   hack/build-binaries.sh [--force] [--allow-failures] [NAME ...]
#
# NAME is any of: etcd kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler coredns
# vc-scheduler vc-controller-manager kwok training-operator helm helm4, or crds (only the CRDs and
# kwok stages); kubelet, kube-scheduler and coredns are for the box's real nodes (hack/local-up.sh --real-nodes);
# default: all of them.
#
# VOLCANO_VERSION=v1.14.1 in the environment builds that Volcano instead of the default pinned
# in hack/versions.env (one wrapper module per supported version: hack/gomod/volcano-<version>/;
# the box and the tests read the same variable, so export it for them too).
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
#
# Two runs that share a cache directory (`make demo` in one terminal, `make test` in another)
# take turns: the second waits for the lock <key>/.build.lock (printing who holds it every
# minute), then reuses what the first built.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The pins, with VOLCANO_VERSION from the environment (if set) in place of the file's. Same
# rule as hack/localbox/paths.py; the key is "v-" + the first 12 hex digits of the sha256 of
# these KEY=value lines (comments do not change the key).
VERSIONS="$(grep -E '^[A-Z0-9_]+=' "$HACK_DIR/versions.env")"
if [[ -n "${VOLCANO_VERSION:-}" ]]; then
  if [[ ! "$VOLCANO_VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "build-binaries: VOLCANO_VERSION=$VOLCANO_VERSION is not a version like v1.15.1" >&2; exit 2
  fi
  VERSIONS="$(sed "s/^VOLCANO_VERSION=.*/VOLCANO_VERSION=$VOLCANO_VERSION/" <<<"$VERSIONS")"
fi
eval "$VERSIONS"
if [[ ! -f "$HACK_DIR/gomod/volcano-$VOLCANO_VERSION/go.mod" ]]; then
  echo "build-binaries: no wrapper module for Volcano $VOLCANO_VERSION (hack/gomod/volcano-$VOLCANO_VERSION/);" \
    "supported: $(cd "$HACK_DIR/gomod" && ls -d volcano-v* | sed 's/^volcano-//' | tr '\n' ' ')" >&2
  exit 2
fi

CACHE_ROOT="${VOLCANO_ELASTIC_CACHE:-$HOME/.cache/volcano-elastic}"
# Pins outside the key (same list in hack/localbox/paths.py): a tool beside the box whose binary
# says its own version; a bump rebuilds that binary only (see `fresh` below).
UNKEYED_RE='^(HELM4_VERSION)='
KEY="v-$(grep -Ev "$UNKEYED_RE" <<<"$VERSIONS" | sha256sum | cut -c1-12)"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"
LOGS="$OUT/logs"
CRDS="$OUT/crds"
mkdir -p "$BIN" "$LOGS" "$CRDS"

FORCE=0
ALLOW_FAILURES=0
WANT=()
for a in "$@"; do
  case "$a" in
    --force) FORCE=1 ;;
    --allow-failures) ALLOW_FAILURES=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d'; exit 0 ;;
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

# One build per cache directory at a time. flock(1) releases the lock when this process
# exits, however it exits (a killed build leaves no stale lock; its .tmp files are per pid).
exec 9>>"$OUT/.build.lock"
if ! flock -n 9; then
  log "another build holds $OUT/.build.lock ($(cat "$OUT/.build.owner" 2>/dev/null || echo '?')); waiting, then reusing what it built ..."
  WAIT_START=$(date +%s)
  until flock -w 60 9; do
    log "still waiting ($(( $(date +%s) - WAIT_START ))s) for $(cat "$OUT/.build.owner" 2>/dev/null || echo '?')"
  done
  log "lock acquired after $(( $(date +%s) - WAIT_START ))s"
fi
echo "pid $$ on $(hostname) since $(ts) UTC: $0 $*" >"$OUT/.build.owner"
printf '%s\n' "$VERSIONS" >"$OUT/versions.env"

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
helm4_ldflags() {  # Helm 4 reads the Kubernetes version of its client-go from the build info itself
  echo "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM4_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
}
volcano_ldflags() {
  echo "-s -w -X volcano.sh/volcano/pkg/version.Version=$VOLCANO_VERSION -X volcano.sh/volcano/pkg/version.Built=$BUILD_DATE"
}

# One row per binary; add a row (and, if it needs one, a wrapper module under hack/gomod/) to
# build another. Fields:
#   name | wrapper dir under hack/gomod | main package | module@version (messages + pin check)
#   | ldflags fn (k8s, volcano, helm, helm4, plain) | prepare fn (- for none: build in the wrapper itself)
V="volcano-$VOLCANO_VERSION"
TARGETS=(
  "etcd|etcd|go.etcd.io/etcd/server/v3|go.etcd.io/etcd/server/v3@$ETCD_VERSION|plain|-"
  "kube-apiserver|kubernetes|k8s.io/kubernetes/cmd/kube-apiserver|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s|-"
  "kube-controller-manager|kubernetes|k8s.io/kubernetes/cmd/kube-controller-manager|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s|-"
  "kubectl|kubernetes|k8s.io/kubernetes/cmd/kubectl|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s|-"
  "kubelet|kubernetes|k8s.io/kubernetes/cmd/kubelet|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s|-"
  "kube-scheduler|kubernetes|k8s.io/kubernetes/cmd/kube-scheduler|k8s.io/kubernetes@$KUBERNETES_VERSION|k8s|-"
  "coredns|coredns|.|github.com/coredns/coredns@$COREDNS_VERSION|plain|-"
  "vc-scheduler|$V|volcano.sh/volcano/cmd/scheduler|volcano.sh/volcano@$VOLCANO_VERSION|volcano|stage_volcano_apis"
  "vc-controller-manager|$V|volcano.sh/volcano/cmd/controller-manager|volcano.sh/volcano@$VOLCANO_VERSION|volcano|stage_volcano_apis"
  "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|sigs.k8s.io/kwok@$KWOK_VERSION|plain|-"
  "training-operator|training-operator|github.com/kubeflow/training-operator/cmd/training-operator.v1|github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION|plain|-"
  "helm|helm|helm.sh/helm/v3/cmd/helm|helm.sh/helm/v3@$HELM_VERSION|helm|-"
  "helm4|helm4|helm.sh/helm/v4/cmd/helm|helm.sh/helm/v4@$HELM4_VERSION|helm4|-"
)

# Whether an existing binary is the pinned version. The keyed binaries are by their directory;
# an UNKEYED one (helm4) is asked.
fresh() {
  case "$1" in
    helm4) [[ "$("$BIN/helm4" version --template '{{.Version}}' 2>/dev/null)" == "$HELM4_VERSION" ]] ;;
    *) return 0 ;;
  esac
}

# Prepare functions: `fn WRAPPER_DIR` prints the directory to build in.
#
# stage_volcano_apis: a wrapper whose go.mod says `volcano.sh/apis => ./volcano-apis` (Volcano
# >= v1.15, whose volcano.sh/apis the module proxy does not serve) is built from a copy in the
# cache, <key>/gomod/<wrapper>/, next to a fresh copy of the published volcano.sh/apis
# $VOLCANO_APIS_VERSION with the identifiers that Volcano version uses and that release lacks
# appended (VOLCANO_APIS_COMPAT below; values from Volcano's own docs). Other wrappers are
# built in place.
VOLCANO_APIS_COMPAT_PKG=pkg/apis/scheduling/v1beta1
# v1.15.1: docs/design/scheduling-gates-queue-admission.md of volcano.sh/volcano v1.15.1
VOLCANO_APIS_COMPAT='const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"'
stage_volcano_apis() {
  local wrapper="$HACK_DIR/gomod/$1" stage="$OUT/gomod/$1" src
  if ! grep -Eq '^[[:space:]]*volcano\.sh/apis[[:space:]]+=>[[:space:]]+\./volcano-apis[[:space:]]*$' "$wrapper/go.mod"; then
    echo "$wrapper"; return 0
  fi
  src="$(cd "$wrapper" && go mod download -json "volcano.sh/apis@$VOLCANO_APIS_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  if [[ -z "$src" || ! -d "$src/$VOLCANO_APIS_COMPAT_PKG" ]]; then
    echo "build-binaries: cannot download volcano.sh/apis@$VOLCANO_APIS_VERSION from $GOPROXY" >&2; return 1
  fi
  rm -rf "$stage.tmp.$$" && mkdir -p "$stage.tmp.$$"
  cp "$wrapper/go.mod" "$wrapper/go.sum" "$stage.tmp.$$/"
  cp -r --no-preserve=mode "$src" "$stage.tmp.$$/volcano-apis"
  printf '// Written by hack/build-binaries.sh (volcano-elastic): identifiers of volcano.sh/apis %s\n// that %s uses and volcano.sh/apis %s lacks.\n\npackage v1beta1\n\n%s\n' \
    "${VOLCANO_VERSION%.*}" "volcano.sh/volcano@$VOLCANO_VERSION" "$VOLCANO_APIS_VERSION" "$VOLCANO_APIS_COMPAT" \
    >"$stage.tmp.$$/volcano-apis/$VOLCANO_APIS_COMPAT_PKG/zz_volcano_elastic_compat.go"
  rm -rf "$stage" && mv "$stage.tmp.$$" "$stage"
  echo "$stage"
}

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
  IFS='|' read -r name dir pkg modver ldkind prep <<<"$t"
  wanted "$name" || continue
  if [[ -x "$BIN/$name" && $FORCE -eq 0 ]]; then
    if fresh "$name"; then
      log "$name: already built ($BIN/$name)"
      continue
    fi
    log "$name: $BIN/$name is not $modver: rebuilding"
  fi
  if ! check_pin "$dir" "$modver"; then FAILED+=("$name"); continue; fi
  case "$ldkind" in
    k8s) ldflags="$(k8s_ldflags)" ;;
    volcano) ldflags="$(volcano_ldflags)" ;;
    helm) ldflags="$(helm_ldflags)" ;;
    helm4) ldflags="$(helm4_ldflags)" ;;
    *) ldflags="-s -w" ;;
  esac
  blog="$LOGS/build-$name.log"
  builddir="$HACK_DIR/gomod/$dir"
  if [[ "$prep" != "-" ]] && ! builddir="$("$prep" "$dir" 2>"$blog")"; then
    echo "[build-binaries $(ts)] FAILED: $name: preparing hack/gomod/$dir ($prep):" >&2
    sed 's/^/    /' "$blog" >&2
    FAILED+=("$name"); continue
  fi
  log "$name: building $pkg from $modver in ${builddir#"$CACHE_ROOT/"} (log: $blog) ..."
  s=$(date +%s)
  tmp="$BIN/.$name.tmp.$$"
  if (cd "$builddir" && go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") >>"$blog" 2>&1; then
    mv -f "$tmp" "$BIN/$name"
    log "$name: built in $(( $(date +%s) - s ))s ($(du -h "$BIN/$name" | cut -f1))"
  else
    rm -f "$tmp"
    echo "[build-binaries $(ts)] FAILED: $name from module $modver (package $pkg, wrapper hack/gomod/$dir) after $(( $(date +%s) - s ))s. Go said:" >&2
    tail -n 40 "$blog" | sed 's/^/    /' >&2
    FAILED+=("$name")
  fi
done

# CRDs come from the same module zips (module@version from the module cache, downloaded if
# needed; outside any wrapper, so a wrapper built from a staged copy needs nothing here).
copy_crds() {
  local modver="$1" dest="$2"; shift 2
  local src
  src="$(cd "$OUT" && go mod download -json "$modver" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  if [[ -z "$src" || ! -d "$src" ]]; then
    echo "build-binaries: FAILED to download module $modver for its CRDs" >&2
    FAILED+=("crds:$modver"); return
  fi
  mkdir -p "$dest"
  local f
  if [[ "$1" == */ ]]; then  # a whole folder of YAML files
    set -- $(cd "$src" && ls "$1"*.yaml)
  fi
  for f in "$@"; do
    if [[ -f "$src/$f" ]]; then install -m 0644 "$src/$f" "$dest/"; else
      echo "build-binaries: FAILED: $modver has no $f" >&2; FAILED+=("crds:$f"); fi
  done
}
if wanted crds; then
  # every CRD of config/crd/volcano/bases (podgroups, queues, hypernodes, numatopologies,
  # jobs, commands, ...): the scheduler and controllers wait for their informers
  copy_crds "volcano.sh/volcano@$VOLCANO_VERSION" "$CRDS/volcano" config/crd/volcano/bases/
  copy_crds "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION" "$CRDS/training-operator" \
    manifests/base/crds/kubeflow.org_pytorchjobs.yaml
  # kwok has no built-in stages: node-initialize/heartbeat keep nodes Ready, pod-ready marks
  # bound pods Running, pod-delete finishes deletions, pod-complete completes Job pods
  KS=kustomize/stage
  copy_crds "sigs.k8s.io/kwok@$KWOK_VERSION" "$OUT/kwok-stages" \
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
