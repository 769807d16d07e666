"""The agent's state gauges, from the planner's view of one cycle (what the cycle already has: its
``World``, its plan and the notices it found; nothing is read again): per queue the elastic pods
held by a scale-up gate, the jobs whose growth is held back by reason code, the pods under an
eviction notice, and the GPUs its elastic workers hold beside its deserved and allocated GPUs as
the configured share model counts them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..policy.decisions import CyclePlan, HoldNote
from ..policy.keys import GPU
from ..policy.notices import NoticeReview
from ..policy.world import World


@dataclass(frozen=True, slots=True)
class CycleState:
    """Gauge values of one cycle; every queue of the snapshot is in each per-queue map (0 when none)."""

    gated_pods: dict[str, int] = field(default_factory=dict)  # queue -> gated elastic pods
    held_jobs: dict[tuple[str, str], int] = field(default_factory=dict)  # (queue, reason code) -> jobs
    under_notice: dict[str, int] = field(default_factory=dict)  # queue -> pods under notice (the victims')
    elastic_gpus: dict[str, int] = field(default_factory=dict)  # queue -> GPUs its elastic workers hold
    deserved_gpus: dict[str, int] = field(default_factory=dict)  # queue -> deserved GPUs (share model)
    allocated_gpus: dict[str, int] = field(default_factory=dict)  # queue -> allocated GPUs (share model)


def cycle_state(world: World, plan: CyclePlan, notices: NoticeReview | None = None) -> CycleState:
    queues = {q.name for q in world.snapshot.queues} | set(world.shares)
    zero = dict.fromkeys(sorted(queues), 0)

    def queue_of(group: str) -> str:
        pg = world.podgroups.get(group)
        return pg.queue if pg is not None else ""

    gated = dict(zero)
    for group, (pods, _) in world.gated_elastic().items():
        q = queue_of(group)
        gated[q] = gated.get(q, 0) + len(pods)
    held: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    for note in plan.notes:
        if not isinstance(note, HoldNote) or note.job in seen:
            continue
        seen.add(note.job)
        job = world.jobs.get(note.job)
        key = (job.queue if job is not None else queue_of(note.job), note.reason)
        held[key] = held.get(key, 0) + 1
    noticed = dict(zero)
    review = notices or NoticeReview()
    for facts in [p.facts for p in review.pending] + [d.facts for d in review.due]:
        noticed[facts.queue] = noticed.get(facts.queue, 0) + 1
    elastic = dict(zero)
    for pod in world.elastic_holding:
        q = queue_of(pod.group_key)
        elastic[q] = elastic.get(q, 0) + int(pod.requests.get(GPU, 0))
    deserved = dict(zero)
    allocated = dict(zero)
    for name, share in world.shares.items():
        deserved[name] = int(share.deserved.get(GPU, 0))
        allocated[name] = int(share.allocated.get(GPU, 0))
    return CycleState(gated, held, noticed, elastic, deserved, allocated)
