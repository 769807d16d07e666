"""Neighbours: other systems that schedule PyTorchJobs or shape gangs, detected where it is cheap.

volcano-elastic leaves a PyTorchJob alone (no PodGroup, no role annotations, no gate) when
someone else decides where and when it runs: Kueue (the job carries ``kueue.x-k8s.io/queue-name``,
or MultiKueue manages it through ``runPolicy.managedBy``), or another scheduler named in its pod
templates. The controller says so once with a Warning Event on the job; the mutating webhook
leaves pods alone that show it on themselves (an explicit other ``schedulerName``, a Kueue label).

A Volcano PodGroup with ``spec.networkTopology`` (HyperNodes) is scheduled topology-aware by
Volcano, while our evictions and scale-up only see nodes: it gets a warning, nothing else changes.
Our position on each neighbour is in docs/compatibility.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"  # what Kueue puts on the pod templates it admits
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
DEFAULT_SCHEDULER = "default-scheduler"


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def other_scheduler(name: Any, ours: str) -> bool:
    return isinstance(name, str) and name not in ("", DEFAULT_SCHEDULER, ours)


def job_neighbour(job: Mapping[str, Any], scheduler: str) -> str | None:
    """Why a PyTorchJob (raw object) belongs to a neighbour, or None when it is ours to manage."""
    queue = _labels(job).get(KUEUE_QUEUE_LABEL)
    if queue:
        return f"it is managed by Kueue (label {KUEUE_QUEUE_LABEL}={queue})"
    spec = job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    run = spec.get("runPolicy")
    if isinstance(run, Mapping) and run.get("managedBy") == MULTIKUEUE:
        return f"it is managed by MultiKueue (runPolicy.managedBy={MULTIKUEUE})"
    replicas = spec.get("pytorchReplicaSpecs")
    for rtype, rspec in (replicas.items() if isinstance(replicas, Mapping) else ()):
        template = rspec.get("template") if isinstance(rspec, Mapping) else None
        pod = template.get("spec") if isinstance(template, Mapping) else None
        name = pod.get("schedulerName") if isinstance(pod, Mapping) else None
        if other_scheduler(name, scheduler):
            return f"its {rtype} pods are scheduled by {name!r}, not {scheduler!r}"
    return None


def pod_neighbour(labels: Mapping[str, Any], scheduler_name: Any, scheduler: str) -> str | None:
    """Why a PyTorchJob pod at admission belongs to a neighbour (seen on the pod alone), or None."""
    for key in (KUEUE_QUEUE_LABEL, KUEUE_PODSET_LABEL):
        if labels.get(key):
            return f"it carries Kueue's label {key}"
    if other_scheduler(scheduler_name, scheduler):
        return f"spec.schedulerName is {scheduler_name!r}"
    return None


def network_topology(podgroup: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``spec.networkTopology`` of a PodGroup (Volcano HyperNodes), or None."""
    spec = podgroup.get("spec")
    topo = spec.get("networkTopology") if isinstance(spec, Mapping) else None
    return topo if isinstance(topo, Mapping) and topo else None
