"""The attained-service stamps (``policy.attained``, issue 38): the agent keeps each job's GPU-seconds
held on its PodGroup (``volcano-elastic.io/attained-service``) so that the service survives agent
restarts and reads from a ``kubectl get -o json`` dump.

The service now is the stamp plus the placed pods' time since it, so a stamp is only rewritten when a
pod left (an eviction, a completion of a worker, a preemption, a lost node): ``AttainedStamps``
remembers the placed pods of its last cycle, and for each group one of them left since, writes the
service now plus the departed pods' time from the stamp to their last sighting (exact to within one
agent cycle). While no pod leaves, nothing is written."""

from __future__ import annotations

from datetime import datetime
from functools import partial

from ..kube.errors import KubeError
from ..kube.resources import PODGROUPS
from ..policy import keys
from ..policy.attained import attained_service, format_stamp, gpus, holds_node, stamp_of
from ..policy.model import PodView, Snapshot
from .executor import Executor, log, split


class AttainedStamps:
    """The placed pods of the agent's last cycle, and the stamps their departures call for."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, float, datetime | None]] = {}  # uid -> (group, GPUs, scheduled at)
        self.last: datetime | None = None

    def cycle(self, ex: Executor, snapshot: Snapshot, now: datetime) -> int:
        """Write the stamps of our groups that lost a placed pod since the last cycle; returns how many."""
        current = {p.uid: (p.group_key, gpus(p), p.scheduled_at) for p in snapshot.pods
                   if p.group_key and holds_node(p)}
        missed: dict[str, float] = {}
        last = self.last
        groups = {pg.key: pg for pg in snapshot.podgroups}
        if last is not None:
            for uid, (group, n, scheduled) in self.seen.items():
                if uid in current or group not in groups:
                    continue
                stamp = stamp_of(groups[group])
                since = scheduled if stamp is None or (scheduled is not None and scheduled > stamp.as_of) \
                    else stamp.as_of
                held = n * max(0.0, (last - since).total_seconds()) if since is not None else 0.0
                missed[group] = missed.get(group, 0.0) + held
        self.seen, self.last = current, now
        if not missed or ex.dry_run:
            return 0
        pods: dict[str, list[PodView]] = {}
        for p in snapshot.pods:
            if p.group_key in missed and holds_node(p):
                pods.setdefault(p.group_key, []).append(p)
        tasks = []
        for group in sorted(missed):
            pg = groups[group]
            if pg.labels.get(keys.MANAGED_BY_LABEL) != keys.MANAGED_BY:
                continue
            value = format_stamp(attained_service(pg, pods.get(group, ()), now) + missed[group], now)
            tasks.append((group, partial(_write, ex, group, value)))
        written = 0
        for done in ex.pool.run(tasks):  # one PodGroup each, concurrently (Executor.pool)
            if isinstance(done.error, KubeError):
                log.warning("attained-service stamp not written", extra={"job": done.key, "error": str(done.error)})
            elif done.error is not None:
                raise done.error  # the Lease lost
            else:
                written += 1
        return written


def _write(ex: Executor, group: str, value: str) -> None:
    ns, name = split(group)
    ex.fence(f"stamp attained service {group}")
    out = ex.api.patch(PODGROUPS, name, {"metadata": {"annotations": {keys.ATTAINED_SERVICE: value}}}, ns)
    ex.store.put(PODGROUPS, out)
