"""The ordering rules of the policy, each written once (modelled on kueue's ``preemption/common/ordering.go``).

Every planner site calls these functions; none spells a rule out again. Change a rule here and the
eviction search, its node index, the own-queue share victims and the scale-up order all follow.

**Victim sets** (``eviction.search._Score``, issue 19: every worker of a disrupted job restarts from its
last checkpoint). Among the victim sets that make room for a gang's needed pod on a node, the
smallest of

A. the jobs the set disrupts that no victim of this cycle disrupted yet (``Planner.new_jobs``);
B. the number of victims;
C. the victims' keys in order (``sequence_key``, below);

wins; then the least dominant resource left on the node, then the node's name. A gang whose plan by
A-C leaves no room for a later needed pod, or takes more victims than its queue has evictions left
where fewer would do, is planned by B-C alone (``eviction.search._assign``, ``Planner.plan_gang``):
restart cost never makes a gang wait for want of room on the nodes or of evictions left.

**Victims** (``victim_key``: the smallest key is evicted first). Among candidate elastic workers:

0. in a queue with ``orderBy: attainedService`` (the default), the most served job first
   (``-JobState.served``: GPU-seconds held, ``attained.py``; fixed for the cycle); a job of a queue
   with ``orderBy: fulfillment`` ranks 0 here, as does a job never placed;
1. the most fulfilled job first (``-fulfillment``, recomputed as the cycle takes its workers);
2. then the job of lower priority (its PodGroup's PriorityClass value; any integer, negative too);
3. then the least work lost: the job's most recent checkpoint first (``-last-checkpoint-time``;
   unknown counts as oldest), then the fewest GPUs restarted (all of the job's workers' GPUs);
4. then the highest replica index (the newest worker of the job);
5. then the pod's UID (a total order: ties are broken the same way on every run).

Criteria 0-3 depend on the job only (``job_rank``; 0 and 3 are fixed for the cycle: ``JobState.served``,
``JobState.loss`` set by the planner); 4-5 on the pod only (``pod_rank``).

**Monotonicity contract** (what the node index of ``eviction.index`` prunes on): as a job loses
workers within one cycle, its ``job_rank`` never sorts earlier, so the key of any of its pods never
sorts earlier either. A node's best key at the start of the cycle is therefore a lower bound of the
first key of any victim set chosen there later, and a node whose bound is worse than the best plan
found cannot win. Criterion 1 holds it (fulfillment only drops as workers are taken), criteria 0
and 2 are fixed for the cycle (attained service is computed once, as of the cycle's ``now``); a new
criterion must keep it (``tests/unit/test_policy_ordering.py`` checks it by a property).

**Scale-up** (``scale_up_key``: the smallest key grows first; each job grows in one event to the
largest allowed size that fits, see ``gates``). Among running jobs with gated elastic workers:

1. a job in its first rendezvous first (its growth costs no restart);
1a. in a queue with ``orderBy: attainedService``, the least served job first (``JobState.served``;
   a job of a queue with ``orderBy: fulfillment`` ranks 0 here);
2. then the least fulfilled job;
3. then its lowest gated replica index;
4. then that pod's name;
5. then the job's key.

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
# victim criteria 0-3: (-served, -fulfillment, priority, -checkpoint, GPUs)
JobRank = tuple[float, float, int, float, int]
PodRank = tuple[int, str]  # victim criteria 4-5: (-replica index, uid)
Key = tuple[float, float, int, float, int, int, str]  # job_rank + pod_rank
ScaleUpKey = tuple[int, float, float, int, str, str]  # scale-up criteria 1, 1a, 2-5


class VictimKey(NamedTuple):
    """A victim's key, field by field (criteria 0-5 above)."""

    neg_served: float
    neg_fulfillment: float
    priority: int
    neg_checkpoint: float
    gpus_restarted: int
    neg_replica_index: int
    uid: str


def job_rank(job: JobState, extra_taken: int = 0) -> JobRank:
    """Victim criteria 0-3 for ``job`` with ``extra_taken`` more of its workers taken than it shows."""
    served = -job.served if job.by_service else 0.0
    if extra_taken:
        job.taken += extra_taken
        try:
            return (served, -job.fulfillment(), job.priority, *job.loss)
        finally:
            job.taken -= extra_taken
    return (served, -job.fulfillment(), job.priority, *job.loss)


def pod_rank(pod: PodView) -> PodRank:
    """Victim criteria 4-5 for ``pod``."""
    return (-pod.replica_index, pod.uid)


def victim_key(rank: JobRank, pod: PodView) -> Key:
    """The key of ``pod`` as a victim when its job ranks ``rank``: criteria 1-5, in order."""
    return (*rank, -pod.replica_index, pod.uid)


def scale_up_pod_rank(pod: PodView) -> tuple[int, str]:
    """Scale-up criteria 3-4 for ``pod`` (the order of one job's gated workers)."""
    return (pod.replica_index, pod.name)


def scale_up_key(first_rendezvous: bool, job: JobState, pod: PodView, jid: str) -> ScaleUpKey:
    """Scale-up criteria 1-5 for growing ``job`` (``pod``: its lowest gated worker; ``jid``: its key)."""
    return (0 if first_rendezvous else 1, job.served if job.by_service else 0.0, job.fulfillment(),
            *scale_up_pod_rank(pod), jid)


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
