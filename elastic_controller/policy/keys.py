"""Label, annotation and gate names of the contract, defined once."""

from __future__ import annotations

from enum import StrEnum

PREFIX = "volcano-elastic.io"

# Annotations we write on pods.
ROLE = f"{PREFIX}/role"
MIN_REPLICAS = f"{PREFIX}/min-replicas"
MAX_REPLICAS = f"{PREFIX}/max-replicas"
EVICTED_FOR = f"{PREFIX}/evicted-for"
EVICT_AFTER = f"{PREFIX}/evict-after"  # RFC 3339: a victim under notice is evicted then
# "N": how many of the job's pods will run torchrun after the last scale decision (ungated, not
# leaving), on every such pod; the job kit's rendezvous completes a round once N nodes joined.
TARGET_WORKERS = f"{PREFIX}/target-workers"
# In-place resizing (issue 39; docs/checkpointing.md, "Resizing in place"; the kit's podinfo mirrors
# these): RESIZE on the PyTorchJob ("in-place": its processes survive planned scale events); the agent
# writes RESIZE_GENERATION "G" (its G-th planned event of the job) with TARGET_WORKERS on every pod of
# the job, and LEAVING "G" on the pods that leave at event G, in the same patch; the kit writes LEFT
# "G" on a leaving pod once it has left the process group (the agent then evicts it).
RESIZE = f"{PREFIX}/resize"
RESIZE_IN_PLACE = "in-place"
RESIZE_GENERATION = f"{PREFIX}/resize-generation"
LEAVING = f"{PREFIX}/leaving"
LEFT = f"{PREFIX}/left"

# The job contract (issue 20): written by the job's owner on the PyTorchJob; the controller copies
# the first two to the job's PodGroup. LAST_CHECKPOINT_TIME is written by the training code on the
# PyTorchJob or any of its pods (the newest wins).
WORKER_COUNTS = f"{PREFIX}/worker-counts"  # "2,4,8": the allowed Worker counts
WORKER_STEP = f"{PREFIX}/worker-step"  # "N": min, min+N, min+2N, ... up to max
LAST_CHECKPOINT_TIME = f"{PREFIX}/last-checkpoint-time"  # RFC 3339
COPIED_TO_PODGROUP = (WORKER_COUNTS, WORKER_STEP)

# Annotation the controller writes on a PyTorchJob whose PodGroup it withholds (its queue's
# elasticMinShare, policy/minshare.py): why; removed once the PodGroup is created.
HELD = f"{PREFIX}/held"

# Annotations we write on PodGroups.
LAST_SCALE_TIME = f"{PREFIX}/last-scale-time"
LAST_SCALE_DIRECTION = f"{PREFIX}/last-scale-direction"
LAST_DECISION = f"{PREFIX}/last-decision"
# JSON: what the current scale stamp was written for (writer, a unique id, path, gang, the pods it
# acts on, the stamp it replaced); recovery takes back a stamp whose actions never happened, and an
# undo compares this (not "a stamp like ours") before restoring. execute/resume.py, docs/failure-model.md.
SCALE_RECORD = f"{PREFIX}/scale-record"
# "N": how many of torchrun's restarts our scale-downs (and Volcano's preemptions) have used on the
# job, on the PodGroup (the count read) and a copy on the PyTorchJob: a shrink's once one of its victims
# left (policy/restart_count.py), a preemption's with its stamp (policy/budget.py).
RESTARTS_USED = f"{PREFIX}/restarts-used"
# The id of the scale record whose restart ``restarts-used`` has counted (on the PodGroup only): a
# restart is counted once it happened (a victim evicted or gone), once per record (issue 36, F2).
RESTART_COUNTED = f"{PREFIX}/restart-counted"
# "<GPU-seconds>@<RFC 3339>": the job's attained service (GPU-seconds held) as of that time, written by
# the agent on the PodGroup (policy/attained.py).
ATTAINED_SERVICE = f"{PREFIX}/attained-service"

DEFAULT_GATE = f"{PREFIX}/scale-up"
# Volcano's own scheduling gate (queue admission by scheduling gates, v1.15): a pod gated only by it
# counts in its job's inqueue resources, not among the gated ones deducted from them
# (pkg/scheduler/api/helpers.go HasOnlyVolcanoSchedulingGate, job_info.go GetSchGatedPodResources).
VOLCANO_QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"

# Volcano.
GROUP_NAME = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"
TASK_PRIORITY = "volcano.sh/task-priority"
PREEMPTABLE = "volcano.sh/preemptable"
NAMESPACE_QUEUE = "scheduling.volcano.sh/queue-name"
PODGROUP_GROUP = "scheduling.volcano.sh"
PODGROUP_VERSION = "v1beta1"

# Kubeflow training operator.
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
OPERATOR_NAME = "pytorchjob-controller"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
PET_NNODES = "PET_NNODES"
PYTORCH_CONTAINER = "pytorch"

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "volcano-elastic"

GPU = "nvidia.com/gpu"


class Role(StrEnum):
    MASTER = "master"
    CORE = "core"
    ELASTIC = "elastic"


class Direction(StrEnum):
    UP = "up"
    DOWN = "down"
