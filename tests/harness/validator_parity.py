"""The cases where our validation of a PyTorchJob must agree with the training operator's webhook
(unit: our answer; e2e: the operator's, on a box)."""

from __future__ import annotations

from typing import Any

from tests.harness.webhook_objects import job


# ---------------------------------------------------------------------- parity with the operator
# The training operator's own validating webhook (v1.9.4, pkg/webhooks/pytorch): what it denies we
# deny in our words, what it warns about we warn about, and what it admits we admit unless one
# of our documented elastic rules (DENIED in tests/unit/test_webhook_validate.py) says otherwise.
def _edit(obj: dict[str, Any], fn: Any) -> dict[str, Any]:
    fn(obj)
    return obj


def _worker(obj: dict[str, Any]) -> dict[str, Any]:
    worker: dict[str, Any] = obj["spec"]["pytorchReplicaSpecs"]["Worker"]
    return worker


PARITY: list[tuple[str, dict[str, Any], str, list[str]]] = [
    # (case, job, what the operator's webhook does, what our answer must say)
    ("nprocPerNode twice",
     _edit(job(), lambda o: (o["spec"].update(nprocPerNode="2"), o["spec"]["elasticPolicy"].update(nProcPerNode=2))),
     "deny", ["spec.nprocPerNode and spec.elasticPolicy.nProcPerNode are both set", "keep only spec.nprocPerNode"]),
    ("elasticPolicy.nProcPerNode deprecated",
     _edit(job(), lambda o: o["spec"]["elasticPolicy"].update(nProcPerNode=2)),
     "warn", ["spec.elasticPolicy.nProcPerNode is deprecated", "spec.nprocPerNode"]),
    ("Worker replicas 0, min/max unset",
     job(workers=0, min_replicas=None, max_replicas=None, max_restarts=None), "deny", ["Worker.replicas is 0"]),
    ("Worker replicas 0 within [min, max]", job(workers=0, min_replicas=1, max_replicas=4),
     "deny", ["Worker.replicas is 0", "at least 1"]),
    ("Worker replicas 0, not elastic", job(workers=0, elastic=False), "deny", ["Worker.replicas is 0"]),
    ("Worker replicas negative", job(workers=-1, elastic=False), "deny", ["Worker.replicas is -1"]),
    ("Master replicas unset",
     _edit(job(master=True, elastic=False), lambda o: o["spec"]["pytorchReplicaSpecs"]["Master"].pop("replicas")),
     "deny", ["Master.replicas is unset", "set replicas: 1"]),
    ("unknown replica type",
     _edit(job(), lambda o: o["spec"]["pytorchReplicaSpecs"].update(Launcher=dict(_worker(o), replicas=1))),
     "deny", ["pytorchReplicaSpecs.Launcher is not a PyTorchJob replica type"]),
    ("no container named pytorch",
     _edit(job(), lambda o: _worker(o)["template"]["spec"]["containers"][0].update(name="trainer")),
     "deny", ["Worker: no container is named 'pytorch'"]),
    ("container without image",
     _edit(job(), lambda o: _worker(o)["template"]["spec"]["containers"][0].pop("image")),
     "deny", ["Worker: container pytorch has no image"]),
    ("name not DNS-1035", _edit(job(), lambda o: o["metadata"].update(name="7train")),
     "deny", ["metadata.name '7train' is not a DNS-1035 label"]),
    ("unsupported managedBy", _edit(job(), lambda o: o["spec"].update(runPolicy={"managedBy": "me.io/x"})),
     "deny", ["runPolicy.managedBy is 'me.io/x'"]),
    ("MultiKueue managedBy", _edit(job(), lambda o: o["spec"].update(runPolicy=dict(
        managedBy="kueue.x-k8s.io/multikueue"))), "warn", ["leaves this job alone", "managed by MultiKueue"]),
    ("a sidecar next to the pytorch container",
     _edit(job(), lambda o: _worker(o)["template"]["spec"]["containers"].append({"name": "log", "image": "busybox"})),
     "admit", []),
    ("nprocPerNode alone", _edit(job(), lambda o: o["spec"].update(nprocPerNode="auto")), "admit", []),
]
