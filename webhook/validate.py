"""What the validating webhook says about a PyTorchJob: denials and warnings for its owner.

Denials are the specs the controller could not plan (``plan_podgroup``, so the webhook and
the controller never disagree) plus ``restartPolicy: Never`` on elastic workers. Warnings
are specs that work but not the way their owner probably expects.

Parity with the training operator's own validating webhook (v1.9.4,
``pkg/webhooks/pytorch/pytorchjob_webhook.go``): what it rejects we reject first, with a
message that says what to change (``operator_rules``); what it warns about we warn about. We
never deny what the operator admits except by our documented elastic rules (docs/install.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_controller.policy import keys
from elastic_controller.policy.model import JobView
from elastic_controller.policy.neighbours import KUEUE_QUEUE_LABEL, job_neighbour
from elastic_controller.policy.parse import ParseError, parse_job
from elastic_controller.policy.podgroups import JobSpecError, PodGroupPlan, plan_podgroup, resolve_queue
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from elastic_controller.policy.worldsizes import check_worker_sizes

# torchrun restarts the whole worker group whenever a node leaves, and counts it against
# --max-restarts (PET_MAX_RESTARTS, from elasticPolicy.maxRestarts; torchrun's default is 0).
# Every eviction of an elastic worker is one such restart, so fewer than this is a warning.
MIN_MAX_RESTARTS = 3
# What the kubelet gives a pod between SIGTERM and SIGKILL when its spec does not say.
DEFAULT_GRACE_SECONDS = 30
# The built-in notice: the default every queue has unless the admin sets one (notice_warning).
DEFAULT_NOTICE_SECONDS = QueuePolicy().noticeSeconds


@dataclass(frozen=True, slots=True)
class JobVerdict:
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors


def _job_view(obj: Mapping[str, Any]) -> JobView:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and not meta.get("name"):
        # CREATE with generateName: the name is not chosen yet.
        obj = {**obj, "metadata": {**meta, "name": meta.get("generateName") or "(generated)"}}
    try:
        return parse_job(obj)
    except ParseError as exc:
        # Its message starts with "PyTorchJob ns/name"; the response names the job already.
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        who = f"PyTorchJob {meta.get('namespace')}/{meta.get('name')}"
        raise JobSpecError(str(exc).removeprefix(who).lstrip(" :").removeprefix("is ") or str(exc)) from exc
    except (AttributeError, TypeError, ValueError) as exc:
        # Only reachable with objects the CRD schema would have rejected before us.
        raise JobSpecError(f"the PyTorchJob spec cannot be read: {exc}") from exc


# The operator's rules (v1.9.4): replica types, the container it runs torchrun in, managedBy.
OPERATOR_REPLICA_TYPES = ("Master", "Worker")
OPERATOR_CONTAINER = "pytorch"
OPERATOR_MANAGERS = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def operator_rules(obj: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(errors, warnings) for what the training operator's webhook rejects or warns about, in our
    words. Only reads the raw object; shapes the CRD schema rejects are left to parse_job."""
    errors: list[str] = []
    warnings: list[str] = []
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str) and name and (len(name) > 63 or not _DNS1035.fullmatch(name)):
        errors.append(f"metadata.name {name!r} is not a DNS-1035 label (lower-case letters, digits and '-', "
                      "starting with a letter, at most 63 characters): the training operator names Services "
                      "after the job")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return errors, warnings
    run = spec.get("runPolicy")
    manager = run.get("managedBy") if isinstance(run, Mapping) else None
    if manager is not None and manager not in OPERATOR_MANAGERS:
        errors.append(f"runPolicy.managedBy is {manager!r}: the training operator accepts only "
                      f"{' or '.join(OPERATOR_MANAGERS)} (or no managedBy)")
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, Mapping) and elastic.get("nProcPerNode") is not None:
        if spec.get("nprocPerNode") is not None:
            errors.append("spec.nprocPerNode and spec.elasticPolicy.nProcPerNode are both set: keep only "
                          "spec.nprocPerNode (elasticPolicy.nProcPerNode is deprecated and the training "
                          "operator rejects the two together)")
        else:
            warnings.append("spec.elasticPolicy.nProcPerNode is deprecated: move it to spec.nprocPerNode")
    rspecs = spec.get("pytorchReplicaSpecs")
    if not isinstance(rspecs, Mapping):
        return errors, warnings
    for rtype, rspec in rspecs.items():
        if rtype not in OPERATOR_REPLICA_TYPES:
            errors.append(f"pytorchReplicaSpecs.{rtype} is not a PyTorchJob replica type: use "
                          f"{' or '.join(OPERATOR_REPLICA_TYPES)}")
        if not isinstance(rspec, Mapping):
            continue
        template = rspec.get("template")
        pod = template.get("spec") if isinstance(template, Mapping) else None
        containers = pod.get("containers") if isinstance(pod, Mapping) else None
        containers = [c for c in containers if isinstance(c, Mapping)] if isinstance(containers, list) else []
        if not any(c.get("name") == OPERATOR_CONTAINER for c in containers):
            errors.append(f"{rtype}: no container is named {OPERATOR_CONTAINER!r}: the training operator runs "
                          "torchrun in (and sets PET_* on) the container of that name")
        for i, c in enumerate(containers):
            if not c.get("image"):
                errors.append(f"{rtype}: container {c.get('name') or i} has no image")
        count = _count(rspec.get("replicas"))
        if rtype == "Master" and count != 1:
            shown = "unset" if rspec.get("replicas") is None else str(rspec.get("replicas"))
            errors.append(f"Master.replicas is {shown}: a PyTorchJob has exactly one master; set replicas: 1")
        elif rtype != "Master" and count is not None and count < 1:
            errors.append(f"{rtype}.replicas is {count}: it must be at least 1 (the training operator rejects "
                          "fewer; delete or suspend the job to stop it)")
    return errors, warnings


def _neighbour_warnings(obj: Mapping[str, Any], neighbour: str) -> list[str]:
    """A neighbour's job: say that we leave it alone, and what keeps our pod webhook off its pods."""
    out = [f"volcano-elastic leaves this job alone because {neighbour}: no PodGroup, gates or evictions"]
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if isinstance(labels, Mapping) and labels.get(KUEUE_QUEUE_LABEL):
        spec = obj.get("spec")
        rspecs = spec.get("pytorchReplicaSpecs") if isinstance(spec, Mapping) else None
        bare = []
        for rtype, rspec in (rspecs.items() if isinstance(rspecs, Mapping) else ()):
            template = rspec.get("template") if isinstance(rspec, Mapping) else None
            tmeta = template.get("metadata") if isinstance(template, Mapping) else None
            tlabels = tmeta.get("labels") if isinstance(tmeta, Mapping) else None
            if not (isinstance(tlabels, Mapping) and tlabels.get(KUEUE_QUEUE_LABEL)):
                bare.append(str(rtype))
        if bare:
            out.append(f"add the label {KUEUE_QUEUE_LABEL} to the pod template of {', '.join(bare)} too: the "
                       "volcano-elastic pod webhook sees pods, not jobs, and would otherwise gang and gate them")
    return out


def validate_job(obj: Mapping[str, Any], cfg: ElasticConfig) -> JobVerdict:
    parity_errors, parity_warnings = operator_rules(obj)
    neighbour = job_neighbour(obj, cfg.schedulerName)
    if neighbour is not None:
        # Not ours to manage: only what the operator itself rejects, never our elastic rules.
        return JobVerdict(errors=tuple(parity_errors),
                          warnings=(*parity_warnings, *_neighbour_warnings(obj, neighbour)))
    verdict = _elastic_rules(obj, cfg)
    if any(".replicas is" in e for e in parity_errors):
        # Our plan's reasons would blame a symptom (minReplicas defaulting to a Worker.replicas of 0).
        return JobVerdict(errors=tuple(parity_errors), warnings=tuple(parity_warnings))
    return JobVerdict(errors=(*parity_errors, *verdict.errors), warnings=(*parity_warnings, *verdict.warnings))


def _elastic_rules(obj: Mapping[str, Any], cfg: ElasticConfig) -> JobVerdict:
    try:
        job = _job_view(obj)
        plan = plan_podgroup(job, cfg)
    except JobSpecError as exc:
        return JobVerdict(errors=(str(exc),))
    bounds = plan.bounds
    worker = job.replicas.get("worker")
    errors: list[str] = []
    warnings: list[str] = []
    if bounds.elastic and worker is not None and worker.restart_policy == "Never":
        errors.append(
            "Worker.restartPolicy is Never: volcano-elastic evicts elastic workers (index >= "
            f"minReplicas={bounds.min_replicas}) to make room for other jobs, and with Never an evicted "
            "worker fails the whole job; use OnFailure (or ExitCode)"
        )
    if job.has_elastic_policy and worker is not None and worker.replicas < bounds.max_replicas:
        warnings.append(
            f"Worker.replicas ({worker.replicas}) is below elasticPolicy.maxReplicas ({bounds.max_replicas}): "
            f"the operator creates exactly Worker.replicas pods, so the job never grows beyond "
            f"{worker.replicas}; set replicas to {bounds.max_replicas}"
        )
    if job.has_metrics:
        warnings.append(
            "elasticPolicy.metrics creates an autoscaler that also changes Worker.replicas and "
            "fights volcano-elastic's scaling; remove metrics"
        )
    if job.has_elastic_policy and "master" in job.replicas:
        warnings.append(
            "a Master replica with elasticPolicy: torchrun counts the master among its nodes "
            "(PET_NNODES); prefer Worker replicas only (worker-0 then acts as the master)"
        )
    if bounds.elastic and (job.max_restarts is None or job.max_restarts < MIN_MAX_RESTARTS):
        shown = "unset (torchrun's default is 0)" if job.max_restarts is None else str(job.max_restarts)
        end = ("with 0 the first eviction ends the job" if not job.max_restarts
               else f"the job fails at scale-down number {job.max_restarts + 1}")
        warnings.append(
            f"elasticPolicy.maxRestarts is {shown}: each scale-down uses one torchrun restart on every "
            f"surviving worker; {end}; set it to at least {MIN_MAX_RESTARTS} (more for long jobs)"
        )
    if bounds.elastic and _sigterm_trap_exits_zero(obj):
        warnings.append(
            "the Worker command traps SIGTERM and exits 0: the training operator then marks the whole "
            "elastic job Succeeded at the first eviction (measured, v1.9.4); exit 143 (128 + 15) instead"
        )
    if bounds.elastic and _standalone(obj):
        errors.append(
            "elasticPolicy.standalone is true: torchrun then runs its rendezvous on localhost in each pod, so "
            "the workers never form one job; remove standalone (the operator sets the c10d rendezvous on "
            "worker-0)"
        )
    contract = contract_verdict(obj, job, plan, cfg)
    errors += contract.errors
    warnings += contract.warnings
    return JobVerdict(errors=tuple(errors), warnings=tuple(warnings))


# `trap '...; exit 0' TERM` (or `exit`, whose status is the last command's: usually 0) in a shell
# wrapper: the evicted worker ends 0, which the operator reads as the job's success.
_TRAP = re.compile(r"""trap\s+(['"])(?P<action>.*?)\1\s+(?:\w+\s+)*?(?:SIG)?(?:TERM|15)\b""", re.S)
_EXITS_ZERO = re.compile(r"\bexit(?:\s+0)?\s*(?:$|;|&&|\|\|)")


def _sigterm_trap_exits_zero(obj: Mapping[str, Any]) -> bool:
    """Whether a Worker container's command traps SIGTERM with an action that exits 0."""
    for c in _worker_pod_spec(obj).get("containers") or []:
        if not isinstance(c, Mapping):
            continue
        words = [w for key in ("command", "args") for w in (c.get(key) or []) if isinstance(w, str)]
        for m in _TRAP.finditer(" ".join(words)):
            if _EXITS_ZERO.search(m.group("action").strip()):
                return True
    return False


def _standalone(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    elastic = spec.get("elasticPolicy") if isinstance(spec, Mapping) else None
    return isinstance(elastic, Mapping) and elastic.get("standalone") is True


def contract_verdict(obj: Mapping[str, Any], job: JobView, plan: PodGroupPlan, cfg: ElasticConfig) -> JobVerdict:
    """The job contract of issue 20: the allowed Worker counts (``worker-counts`` / ``worker-step``)
    against the job's bounds, and the eviction notice of its queue against the workers' grace period."""
    sizes = check_worker_sizes(job.annotations, plan.bounds.min_replicas, plan.bounds.max_replicas)
    warnings = list(sizes.warnings)
    notice = notice_warning(obj, job, plan, cfg)
    if notice:
        warnings.append(notice)
    return JobVerdict(errors=sizes.errors, warnings=tuple(warnings))


def worker_grace_seconds(obj: Mapping[str, Any]) -> int:
    """The Worker pods' terminationGracePeriodSeconds (the kubelet's default when unset)."""
    pod_spec = _worker_pod_spec(obj)
    value = pod_spec.get("terminationGracePeriodSeconds")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return DEFAULT_GRACE_SECONDS


def _worker_pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Worker replica's pod spec ({} when there is none or it is not a mapping)."""
    specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    for rtype, rspec in specs.items() if isinstance(specs, Mapping) else ():
        if str(rtype).lower() == "worker" and isinstance(rspec, Mapping):
            pod_spec = (rspec.get("template") or {}).get("spec") or {}
            return pod_spec if isinstance(pod_spec, Mapping) else {}
    return {}


def notice_warning(obj: Mapping[str, Any], job: JobView, plan: PodGroupPlan, cfg: ElasticConfig) -> str:
    """A notice an admin chose longer than the workers' grace period: the time the queue gives a
    victim to checkpoint is only there for training code that watches ``evict-after``; on SIGTERM
    alone the job has just the grace period. "" when there is nothing to say.

    Only a notice other than the built-in default (``QueuePolicy().noticeSeconds``, 60 s) warns: the
    default is longer than Kubernetes' default grace period (30 s), so it would warn about every
    elastic job that sets none, and a job that ignores ``evict-after`` still gets what it got
    before the default had a notice (SIGTERM and its grace period, only later). A job admitted whole
    (``wholeGangUpTo``) is never a victim and gets no warning either.

    The queue is the one the webhook can see (the job's, else the config's namespace map, else
    the default); a namespace annotation it cannot read may route the job elsewhere."""
    if not plan.bounds.elastic or plan.whole:
        return ""  # only elastic workers above a gang's need are ever victims
    queue, _ = resolve_queue(job, None, cfg)
    notice = cfg.queue_policy(queue).noticeSeconds
    grace = worker_grace_seconds(obj)
    if notice <= grace or notice == DEFAULT_NOTICE_SECONDS:
        return ""
    return (f"queue {queue!r} gives evicted workers a {notice}s notice ({keys.EVICT_AFTER}) but their "
            f"terminationGracePeriodSeconds is {grace}: checkpoint when the notice appears (see "
            f"docs/checkpointing.md) or set it to {notice}")
