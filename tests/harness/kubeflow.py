"""PyTorchJob manifests (kubeflow.org/v1) to create on a box, for the e2e and real-node tiers and
their benchmarks."""

from __future__ import annotations

from typing import Any


def pytorchjob_manifest(name: str, queue: str, workers: int, elastic: tuple[int, int] | None,
                        template: dict[str, Any], *, master: bool = False) -> dict[str, Any]:
    """A PyTorchJob ``name`` of ``workers`` Worker replicas (and one Master when ``master``), each
    of pod ``template``, in Volcano queue ``queue``; elastic (c10d, maxRestarts 100) between
    ``elastic``'s (min, max) replicas when given."""
    replicas: dict[str, Any] = {"Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": template}}
    if master:
        replicas["Master"] = {"replicas": 1, "restartPolicy": "OnFailure", "template": template}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replicas, "runPolicy": {"schedulingPolicy": {"queue": queue}}}
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": elastic[0], "maxReplicas": elastic[1], "rdzvBackend": "c10d",
                                 "maxRestarts": 100}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec}
