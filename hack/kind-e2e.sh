#!/usr/bin/env bash
# End-to-end run of volcano-elastic on a real (kind) cluster, for machines with Docker.
#
#   hack/kind-e2e.sh [--keep] [--artifacts DIR] [--skip-build]
#
# NOTE: this script cannot run in the project's own development environment (no Docker
# engine there), so it has not been run there; the same behaviour is tested in a control plane
# in a box by `make test-e2e` (hack/local-up.sh: real API server, Volcano, training operator,
# kwok GPU nodes). Use this one to check the image and the manifests on real kubelets.
#
# What it does, in order, and always cleaning up (trap on EXIT):
#   1. creates a kind cluster (1 control plane + 2 workers) and advertises 4 fake
#      `nvidia.com/gpu` on each worker (an extended resource patched into node status; the
#      training pods only sleep, so no device plugin is needed);
#   2. installs Volcano and the Kubeflow training operator at the versions pinned in
#      hack/versions.env, with our recommended scheduler conf (enqueue, allocate, backfill);
#   3. builds our image (docker build), loads it into the nodes, applies
#      manifests/overlays/kind and waits for the certgen Job, the webhook and the controller;
#   4. runs the scenario: two elastic jobs grow into the idle GPUs; a fixed-size job that does
#      not fit makes the agent evict elastic workers (and only those) so that it starts; when
#      it is gone the elastic jobs grow back; `status`, `plan` and `release-gates` run in the
#      cluster;
#   5. collects logs, events and object dumps into the artifacts dir (default
#      ./out/kind-e2e), then deletes the cluster (unless --keep).
#
# Needs: docker, kind (v0.27+), kubectl. Env: KIND_NODE_IMAGE (default kindest/node:v1.33.1),
# CLUSTER_NAME (default volcano-elastic-e2e), TIMEOUT (seconds per wait, default 300).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/versions.env
source "$ROOT/hack/versions.env"

CLUSTER_NAME="${CLUSTER_NAME:-volcano-elastic-e2e}"
KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:v1.33.1}"
TIMEOUT="${TIMEOUT:-300}"
IMAGE="volcano-elastic:dev"   # what manifests/overlays/kind runs (imagePullPolicy: Never)
NS=volcano-elastic-system
ARTIFACTS="$ROOT/out/kind-e2e"
KEEP=0
BUILD=1

while [[ $# -gt 0 ]]; do
  case "$1" in
    --keep) KEEP=1 ;;
    --skip-build) BUILD=0 ;;
    --artifacts) ARTIFACTS="$2"; shift ;;
    -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "kind-e2e: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "kind-e2e: '$tool' is not on PATH" >&2; exit 1; }
done
docker info >/dev/null 2>&1 || { echo "kind-e2e: cannot reach a Docker engine" >&2; exit 1; }

log() { echo "[kind-e2e $(date -u +%H:%M:%S)] $*"; }
fail() { echo "[kind-e2e] FAILED: $*" >&2; exit 1; }
KCTX="kind-$CLUSTER_NAME"
k() { kubectl --context "$KCTX" "$@"; }

mkdir -p "$ARTIFACTS"
KUBECONFIG_FILE="$ARTIFACTS/kubeconfig"

collect() {
  log "collecting logs into $ARTIFACTS"
  k get nodes,pods,podgroups,queues,pytorchjobs,leases -A -o wide >"$ARTIFACTS/objects.txt" 2>&1 || true
  k get nodes,pods,podgroups,queues,priorityclasses,pytorchjobs -A -o json >"$ARTIFACTS/snapshot.json" 2>/dev/null || true
  k get events -A --sort-by=.lastTimestamp >"$ARTIFACTS/events.txt" 2>&1 || true
  for d in volcano-elastic-webhook volcano-elastic-controller; do
    k -n "$NS" logs "deploy/$d" --all-containers --prefix --tail=-1 >"$ARTIFACTS/$d.log" 2>&1 || true
  done
  k -n "$NS" logs job/volcano-elastic-certgen >"$ARTIFACTS/certgen.log" 2>&1 || true
  k -n volcano-system logs deploy/volcano-scheduler --tail=2000 >"$ARTIFACTS/volcano-scheduler.log" 2>&1 || true
  k -n kubeflow logs deploy/training-operator --tail=2000 >"$ARTIFACTS/training-operator.log" 2>&1 || true
  kind export logs "$ARTIFACTS/kind" --name "$CLUSTER_NAME" >/dev/null 2>&1 || true
}

cleanup() {
  local rc=$?
  set +e
  if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
    collect
    if [[ $KEEP == 1 ]]; then
      log "keeping cluster $CLUSTER_NAME (kubectl --context $KCTX ...; delete: kind delete cluster --name $CLUSTER_NAME)"
    else
      log "deleting cluster $CLUSTER_NAME"
      kind delete cluster --name "$CLUSTER_NAME" >/dev/null 2>&1
    fi
  fi
  if [[ $rc == 0 ]]; then log "PASSED (artifacts: $ARTIFACTS)"; else log "FAILED with $rc (artifacts: $ARTIFACTS)"; fi
  exit $rc
}
trap cleanup EXIT

# wait_for DESCRIPTION COMMAND...: retry COMMAND (quietly) until it succeeds or TIMEOUT passes
wait_for() {
  local what="$1"; shift
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || fail "timed out after ${TIMEOUT}s waiting for $what"
    sleep 2
  done
  log "ok: $what"
}

# running_pods NS JOB [REPLICA_TYPE]: how many pods of a PyTorchJob are Running
running_pods() {
  local sel="training.kubeflow.org/job-name=$2"
  [[ -n "${3:-}" ]] && sel+=",training.kubeflow.org/replica-type=$3"
  k -n "$1" get pods -l "$sel" --field-selector=status.phase=Running -o name | wc -l
}
has_running() { [[ "$(running_pods "$1" "$2" "${4:-}")" -eq "$3" ]]; }

# ------------------------------------------------------------------------ 1. cluster
log "creating kind cluster $CLUSTER_NAME ($KIND_NODE_IMAGE)"
kind delete cluster --name "$CLUSTER_NAME" >/dev/null 2>&1 || true
cat <<EOF | kind create cluster --name "$CLUSTER_NAME" --image "$KIND_NODE_IMAGE" --kubeconfig "$KUBECONFIG_FILE" --wait 120s --config -
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
- role: worker
EOF
export KUBECONFIG="$KUBECONFIG_FILE"
for node in $(k get nodes -l '!node-role.kubernetes.io/control-plane' -o name); do
  k patch "$node" --subresource=status --type=json \
    -p '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"4"}]' >/dev/null
done
wait_for "4 GPUs advertised on each worker" bash -c \
  "[[ \$(kubectl --context $KCTX get nodes -o jsonpath='{.items[*].status.allocatable.nvidia\.com/gpu}' | wc -w) -eq 2 ]]"

# ------------------------------------------------------------------------ 2. Volcano + training operator
log "installing Volcano $VOLCANO_VERSION"
k apply --server-side -f "https://raw.githubusercontent.com/volcano-sh/volcano/$VOLCANO_VERSION/installer/volcano-development.yaml" >/dev/null
k -n volcano-system create configmap volcano-scheduler-configmap \
  --from-file=volcano-scheduler.conf="$ROOT/manifests/examples/volcano-scheduler.conf" \
  --dry-run=client -o yaml | k apply --server-side --force-conflicts -f - >/dev/null
k -n volcano-system rollout restart deploy/volcano-scheduler >/dev/null
for d in volcano-scheduler volcano-controllers volcano-admission; do
  k -n volcano-system rollout status "deploy/$d" --timeout="${TIMEOUT}s"
done

log "installing the training operator $TRAINING_OPERATOR_VERSION (no --gang-scheduler-name: we own the PodGroups)"
k apply --server-side -k "github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=$TRAINING_OPERATOR_VERSION" >/dev/null
k -n kubeflow rollout status deploy/training-operator --timeout="${TIMEOUT}s"
if k -n kubeflow get deploy/training-operator -o jsonpath='{.spec.template.spec.containers[0].args}' | grep -q gang-scheduler-name; then
  fail "the training operator runs with --gang-scheduler-name; volcano-elastic must own the PodGroups"
fi

# ------------------------------------------------------------------------ 3. volcano-elastic
if [[ $BUILD == 1 ]]; then
  log "building $IMAGE"
  docker build -t "$IMAGE" "$ROOT"
fi
kind load docker-image "$IMAGE" --name "$CLUSTER_NAME"
log "applying manifests/overlays/kind"
k apply --server-side -k "$ROOT/manifests/overlays/kind"
k -n "$NS" wait --for=condition=complete job/volcano-elastic-certgen --timeout="${TIMEOUT}s"
k -n "$NS" rollout status deploy/volcano-elastic-webhook --timeout="${TIMEOUT}s"
k -n "$NS" rollout status deploy/volcano-elastic-controller --timeout="${TIMEOUT}s"
wait_for "caBundle injected" bash -c \
  "[[ -n \$(kubectl --context $KCTX get mutatingwebhookconfiguration volcano-elastic -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]]"
wait_for "a controller leader" bash -c \
  "[[ -n \$(kubectl --context $KCTX -n $NS get lease volcano-elastic-controller -o jsonpath='{.spec.holderIdentity}') ]]"

# ------------------------------------------------------------------------ 4. scenario
log "departments: queues and namespaces"
k apply -f "$ROOT/manifests/examples/queues.yaml" -f "$ROOT/manifests/examples/namespaces.yaml"
for q in vision nlp; do
  wait_for "queue $q Open" bash -c "[[ \$(kubectl --context $KCTX get queue $q -o jsonpath='{.status.state}') == Open ]]"
done

# job NAME NAMESPACE MIN MAX [master]: a PyTorchJob whose pods only sleep, 1 GPU each
job() {
  local name=$1 ns=$2 min=$3 max=$4 master=${5:-}
  local container="
          containers:
          - name: pytorch
            image: busybox:1.36
            command: [sh, -c, 'echo nnodes=\$PET_NNODES; sleep 36000']
            resources:
              requests: {cpu: 50m, memory: 32Mi, nvidia.com/gpu: 1}
              limits: {nvidia.com/gpu: 1}"
  {
    echo "apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: $name, namespace: $ns}
spec:"
    if [[ -z $master ]]; then
      echo "  elasticPolicy: {minReplicas: $min, maxReplicas: $max, rdzvBackend: c10d, maxRestarts: 100}"
    fi
    echo "  pytorchReplicaSpecs:"
    if [[ -n $master ]]; then
      echo "    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:$container"
    fi
    echo "    Worker:
      replicas: $max
      restartPolicy: OnFailure
      template:
        spec:$container"
  } | k apply -f -
}

log "two elastic jobs (min 2, max 4) grow into the 8 idle GPUs"
job vision-a team-vision 2 4
job vision-b team-vision 2 4
wait_for "PodGroup of vision-a with minMember 2" bash -c \
  "[[ \$(kubectl --context $KCTX -n team-vision get podgroup vision-a -o jsonpath='{.spec.minMember}') == 2 ]]"
wait_for "vision-a at 4 workers" has_running team-vision vision-a 4
wait_for "vision-b at 4 workers" has_running team-vision vision-b 4
gated=$(k -n team-vision get pods -o jsonpath='{range .items[*]}{.spec.schedulingGates}{"\n"}{end}' | grep -c scale-up || true)
[[ $gated -eq 0 ]] || fail "$gated pods still gated although every GPU was free"

# nlp (weight 3) is below its deserved share and vision (weight 4) above it, so the agent may
# take vision's elastic workers, but never below vision's own share: 2 GPUs, not 4.
log "a fixed-size job (1 master + 1 worker = 2 GPUs) in another department cannot fit: elastic workers make room"
job nlp-fixed team-nlp 1 1 master
wait_for "nlp-fixed running (2 pods)" bash -c \
  "[[ \$(kubectl --context $KCTX -n team-nlp get pods -l training.kubeflow.org/job-name=nlp-fixed --field-selector=status.phase=Running -o name | wc -l) -eq 2 ]]"
for j in vision-a vision-b; do
  [[ $(running_pods team-vision $j) -ge 2 ]] || fail "$j went below its min"
  ann=$(k -n team-vision get pod "$j-worker-0" -o jsonpath='{.metadata.annotations.volcano-elastic\.io/role}')
  [[ $ann == master ]] || fail "$j-worker-0 has role '$ann', expected master"
done
evicted=$(k get events -A --field-selector reason=EvictedForGang -o name | wc -l)
(( evicted >= 2 )) || fail "expected >= 2 EvictedForGang events, saw $evicted"
k get events -A --field-selector reason=EvictedForGang -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}' \
  | grep -Ev -- '-worker-[23]$' && fail "a non-elastic pod was evicted"
log "status and plan, from inside the cluster (the controller's image and ServiceAccount)"
k -n "$NS" exec deploy/volcano-elastic-controller -- volcano-elastic status --config /etc/volcano-elastic/config.yaml | tee "$ARTIFACTS/status.txt"
k get nodes,pods,podgroups,queues,priorityclasses,pytorchjobs -A -o json \
  | k -n "$NS" exec -i deploy/volcano-elastic-controller -- volcano-elastic plan --from - --config /etc/volcano-elastic/config.yaml | tee "$ARTIFACTS/plan.txt"

log "the fixed job finishes: after the cooldown the elastic jobs grow back"
k -n team-nlp delete pytorchjob nlp-fixed --wait=true
wait_for "vision-a back at 4 workers" has_running team-vision vision-a 4
wait_for "vision-b back at 4 workers" has_running team-vision vision-b 4

log "uninstall path: webhook configurations first, then release-gates, then the rest"
job vision-c team-vision 1 4   # no GPU left: its elastic pods stay gated
wait_for "vision-c has gated pods" bash -c \
  "kubectl --context $KCTX -n team-vision get pods -l training.kubeflow.org/job-name=vision-c -o jsonpath='{.items[*].spec.schedulingGates}' | grep -q scale-up"
k delete mutatingwebhookconfiguration,validatingwebhookconfiguration volcano-elastic
k -n "$NS" exec deploy/volcano-elastic-controller -- volcano-elastic release-gates --all --config /etc/volcano-elastic/config.yaml
left=$(k get pods -A -o jsonpath='{range .items[*]}{.spec.schedulingGates}{"\n"}{end}' | grep -c volcano-elastic.io/scale-up || true)
[[ $left -eq 0 ]] || fail "$left pods still carry our gate after release-gates --all"
k delete -k "$ROOT/manifests/overlays/kind" --ignore-not-found --wait=true >/dev/null
log "scenario complete"
