"""The ordering rules of the policy, each written once (modelled on kueue's ``preemption/common/ordering.go``).

Every planner site calls these functions; none spells a rule out again. Change a rule here and the
eviction search, its node index, the own-queue share victims and the scale-up heap all follow.

**Victims** (``victim_key``: the smallest key is evicted first). Among candidate elastic workers:

1. the most fulfilled job first (``-fulfillment``, recomputed as the cycle takes its workers);
2. then the job of lower priority (its PodGroup's PriorityClass value; any integer, negative too);
3. then the highest replica index (the newest worker of the job);
4. then the pod's UID (a total order: ties are broken the same way on every run).

Criteria 1-2 depend on the job only (``job_rank``); 3-4 on the pod only (``pod_rank``).

**Monotonicity contract** (what the node index of ``eviction.index`` prunes on): as a job loses
workers within one cycle, its ``job_rank`` never sorts earlier, so the key of any of its pods never
sorts earlier either. A node's best key at the start of the cycle is therefore a lower bound of the
first key of any victim set chosen there later, and a node whose bound is worse than the best plan
found cannot win. Criterion 1 holds it (fulfillment only drops as workers are taken), criterion 2
is fixed for the cycle; a new criterion must keep it (``tests/unit/test_policy_ordering.py``
checks it by a property).

**Scale-up** (``scale_up_key``: the smallest key has its gate lifted first). Among gated elastic
workers of running jobs:

1. the least fulfilled job first (``fulfillment``, recomputed as gates are lifted);
2. then the lowest replica index;
3. then the pod's name;
4. then the job's key.

**Starving gangs** (``gang_key``: planned first): higher PodGroup priority, then older (PodGroup
creation, else when its pods became unschedulable), then key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from .model import PodView

if TYPE_CHECKING:
    from .world import Gang, JobState

# Plain tuples in the search's inner loops (measured: building a NamedTuple costs ~3x a tuple there);
# ``VictimKey`` names the same fields for everything else and compares equal to the plain tuple.
JobRank = tuple[float, int]  # victim criteria 1-2: (-fulfillment, priority)
PodRank = tuple[int, str]  # victim criteria 3-4: (-replica index, uid)
Key = tuple[float, int, int, str]  # job_rank + pod_rank
ScaleUpKey = tuple[float, int, str, str]  # scale-up criteria 1-4


class VictimKey(NamedTuple):
    """A victim's key, field by field (criteria 1-4 above)."""

    neg_fulfillment: float
    priority: int
    neg_replica_index: int
    uid: str


def job_rank(job: JobState, extra_taken: int = 0) -> JobRank:
    """Victim criteria 1-2 for ``job`` with ``extra_taken`` more of its workers taken than it shows."""
    if extra_taken:
        job.taken += extra_taken
        try:
            return (-job.fulfillment(), job.priority)
        finally:
            job.taken -= extra_taken
    return (-job.fulfillment(), job.priority)


def pod_rank(pod: PodView) -> PodRank:
    """Victim criteria 3-4 for ``pod``."""
    return (-pod.replica_index, pod.uid)


def victim_key(rank: JobRank, pod: PodView) -> Key:
    """The key of ``pod`` as a victim when its job ranks ``rank``: criteria 1-4, in order."""
    return (*rank, -pod.replica_index, pod.uid)


def scale_up_pod_rank(pod: PodView) -> tuple[int, str]:
    """Scale-up criteria 2-3 for ``pod`` (the order of one job's gated workers)."""
    return (pod.replica_index, pod.name)


def scale_up_key(job: JobState, pod: PodView, jid: str) -> ScaleUpKey:
    """Scale-up criteria 1-4 for lifting ``pod``'s gate next (``jid``: its job's key)."""
    return (job.fulfillment(), *scale_up_pod_rank(pod), jid)


def gang_key(gang: Gang, epoch: datetime) -> tuple[int, datetime, str]:
    """Starving gangs in planning order (``epoch``: the time of a gang that shows none)."""
    return (-gang.priority, gang.pg.created or gang.since or epoch, gang.key)


def sequence_key(jobs: Mapping[str, JobState], subset: Sequence[PodView]) -> tuple[Key, ...]:
    """The victims of ``subset`` in order, each job's rank recomputed as its earlier victims are
    taken: among equally small victim sets, the one whose sequence is smallest is chosen."""
    rest = list(subset)
    extra: dict[str, int] = {}
    out: list[Key] = []
    while rest:
        best_i = 0
        best: Key | None = None
        for i, p in enumerate(rest):
            key = victim_key(job_rank(jobs[p.job_id], extra.get(p.job_id, 0)), p)
            if best is None or key < best:
                best, best_i = key, i
        assert best is not None
        out.append(best)
        chosen = rest.pop(best_i)
        extra[chosen.job_id] = extra.get(chosen.job_id, 0) + 1
    return tuple(out)
