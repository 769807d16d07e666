"""The attained-service stamps (``policy.attained``, issue 38): the agent writes each running job's
GPU-seconds held on its PodGroup once the stamp is ``REWRITE_SECONDS`` old, so that the service
survives agent restarts and reads from a ``kubectl get -o json`` dump."""

from __future__ import annotations

from datetime import datetime

from ..kube.errors import KubeError
from ..kube.resources import PODGROUPS
from ..policy import keys
from ..policy.attained import stamps_due
from ..policy.model import Snapshot
from .executor import Executor, log, split


def write_attained_stamps(ex: Executor, snapshot: Snapshot, now: datetime) -> int:
    """Write the due ``attained-service`` stamps of our PodGroups (merge patches); returns how many."""
    ours = {pg.key for pg in snapshot.podgroups if pg.labels.get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY}
    written = 0
    for key, value in stamps_due(snapshot, now).items():
        if key not in ours:
            continue
        ns, name = split(key)
        ex.fence(f"stamp attained service {key}")
        try:
            out = ex.api.patch(PODGROUPS, name, {"metadata": {"annotations": {keys.ATTAINED_SERVICE: value}}}, ns)
        except KubeError as exc:
            log.warning("attained-service stamp not written", extra={"job": key, "error": str(exc)})
            continue
        ex.store.put(PODGROUPS, out)
        written += 1
    return written
