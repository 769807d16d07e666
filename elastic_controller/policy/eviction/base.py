"""What every part of the eviction planner shares: the cycle's candidates and the state its
committed plans change (capacity, victims taken, each queue's allocation), and the victim order."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..decisions import Eviction, GangDecision
from ..fit import pod_demand
from ..model import PodView, newest_checkpoint
from ..ordering import Key, job_rank, sequence_key, victim_key
from ..quantity import add
from ..world import Gang, World, allowed_of, is_candidate_role, job_id
from ..worldsizes import AllowedCounts

_MAX_COMBINATIONS = 4000
# How the node of each needed pod is found: "indexed" (the node index prunes, see index.py) or
# "exhaustive" (every node is scored: the reference the indexed search must match).
SearchMode = Literal["indexed", "exhaustive"]


@dataclass(slots=True)
class GangPlan:
    decision: GangDecision
    evictions: list[Eviction]


def _deficit(demand: dict[str, int], free: dict[str, int]) -> dict[str, int]:
    return {k: v - free.get(k, 0) for k, v in demand.items() if free.get(k, 0) < v}


def _covers(deficit: dict[str, int], pods: Sequence[PodView]) -> bool:
    for k, v in deficit.items():
        if sum(p.requests.get(k, 0) for p in pods) + (len(pods) if k == "pods" else 0) < v:
            return False
    return True


def _sum_demand(pods: Sequence[PodView]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        out = add(out, pod_demand(p))
    return out


def _sum_requests(pods: Sequence[PodView]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        out = add(out, p.requests)
    return out


class PlannerBase:
    """The planner's state (``Planner`` is this plus its parts: admissibility, the node index, the
    search, own-queue share victims). The node index's attributes are declared here and built by
    ``NodeIndex._build_index``."""

    # The node index (index.py).
    profiles: list[tuple[int, ...]]
    _profile_ids: dict[tuple[int, ...], int]
    kinds: dict[str, frozenset[tuple[str, int, bool]]]
    _kinds_ok: dict[frozenset[tuple[str, int, bool]], bool]  # for the gang being planned
    start_pref: dict[str, Key]
    tag_members: dict[int, list[str]]  # nodes given each tag (some may have moved on)
    _tag_orders: dict[tuple[int, int], list[str]]  # (tag, size) -> members by preference
    sizes: list[int]
    pref_at_least: dict[int, dict[str, Key]]

    def __init__(self, world: World, search: SearchMode = "indexed",
                 refused: frozenset[str] = frozenset()) -> None:
        self.w = world
        self.search = search
        self.capacity = world.future_capacity()  # terminating pods' resources count as free
        self.evictions_left: dict[str, int] = {}
        self.alloc = {q: dict(s.allocated) for q, s in world.shares.items()}
        self.taken: set[str] = set()
        self.inflight: list[PodView] = []  # victims chosen so far for the gang being planned
        self.candidates_by_node: dict[str, list[PodView]] = {}
        self.candidates_by_job: dict[str, list[PodView]] = {}
        # Candidates are among the elastic pods holding resources; taken in ``pods_by_group`` order
        # (group by group) so that every map below fills in the same order as a walk over the groups.
        # ``refused``: keys of pods whose eviction a PodDisruptionBudget refused lately (the caller
        # remembers them, see agent.PDB_REFUSAL_SECONDS): never candidates, counted in the exclusions.
        # Workers of a job running fewer than its queue's minWorkersToShrink are no candidates either
        # (``World.too_small_to_shrink``), also counted. Nor are ghosts (``World.ghosts``: running on a
        # lost node, where evicting them frees nothing a gang can use), counted with where they are.
        rank = {key: i for i, key in enumerate(world.pods_by_group)}
        by_node, by_job = self.candidates_by_node, self.candidates_by_job
        self.refused: list[PodView] = []
        self.too_small: list[PodView] = []
        self.ghosts: list[PodView] = []
        ghosts = world.ghosts
        small: dict[str, bool] = {}
        for pod in sorted((p for p in world.elastic_holding if is_candidate_role(p)), key=lambda p: rank[p.group_key]):
            if ghosts and pod.key in ghosts:
                self.ghosts.append(pod)
                continue
            if pod.key in refused:
                self.refused.append(pod)
                continue
            jid = pod.job_id
            is_small = small.get(jid)
            if is_small is None:
                is_small = small[jid] = world.too_small_to_shrink(jid)
            if is_small:
                self.too_small.append(pod)
                continue
            pods = by_node.get(pod.node_name)
            if pods is None:
                pods = by_node[pod.node_name] = []
            pods.append(pod)
            pods = by_job.get(pod.job_id)
            if pods is None:
                pods = by_job[pod.job_id] = []
            pods.append(pod)
        # What disrupting each candidate's job loses beyond fairness (ordering.py, victim criterion 3):
        # the work since its last checkpoint (newest first; unknown counts as oldest) and how many GPUs
        # restart (all of its workers'). Fixed for the cycle (set before any job is ranked).
        jobs = world.jobs
        for jid, pods in by_job.items():
            job = jobs[jid]
            ckpt = newest_checkpoint(None, job.pg, world.pods_by_group.get(pods[0].group_key, ()))
            job.loss = (-ckpt.timestamp() if ckpt is not None else math.inf,
                        job.running_workers * pods[0].requests.get(world.dominant, 0))
        # The allowed Worker counts of every candidate's job that restricts them (worker-counts or
        # worker-step on its PodGroup, see worldsizes.py); a job not here may be left at any count
        # in [min, max]. Fixed for the cycle.
        self.counts: dict[str, AllowedCounts] = {}
        for jid in by_job:
            allowed = allowed_of(jobs[jid])
            if allowed is not None:
                self.counts[jid] = allowed
        # Nodes holding candidates of a job disrupted this cycle (victims taken, or picked for the gang
        # being planned), counted per such job: more victims there may disrupt no new job.
        self.hit_nodes: dict[str, int] = {}
        # False while a gang is planned again by fewest victims alone (see search._assign): disrupted
        # jobs then count 0 in every score.
        self.restart_aware = True
        # Set while one gang is planned when its plan was made by fewest victims alone, and why (said in
        # its reason): the plan disrupting the fewest jobs left no room, or took too many victims.
        self.fell_back = False
        self.picks: frozenset[str] = frozenset()  # the node search's picks for the gang being planned
        self.shared_restart = False  # some victim picked for the gang being planned shared its job's restart
        self.disrupted_for: dict[str, str] = {}  # job -> the gang its first victim this cycle was for
        self.fell_back_why = ""
        self._job_verdicts: dict[str, str] = {}  # while one gang is planned (see _why_not)
        self._pools: dict[str, list[PodView]] = {}  # while one gang is planned (see _round_up)
        self.used_greedy = False  # the combination budget ran out while planning this gang
        self._share_refusals: set[tuple[str, int]] = set()
        self.version = 0  # bumped by every committed plan (exclusion counts are cached per version)
        # Per queue: bumped by every committed plan taking a victim from it (what the own-queue
        # caches depend on: a plan taking victims elsewhere leaves them valid).
        self.queue_versions: dict[str, int] = {}
        self._exclusion_cache: dict[tuple[int, str, int, bool], dict[str, int]] = {}
        self._by_queue: dict[str, list[str]] | None = None  # queue -> jobs with candidates
        self._old: dict[str, list[PodView]] = {}  # job -> candidates past minRuntimeSeconds
        self._supply: dict[str, int] = {}  # see _queue_supply
        self._admissible: dict[tuple[str | int, ...], int] = {}  # see _admissible_supply
        self._needs: dict[str, dict[str, int]] = {}  # per gang: its needed pods' requests (_gang_need)
        self._relief: dict[str, tuple[str, ...]] = {}  # per gang queue: see _share_queues

    def _reset_gang_caches(self) -> None:
        """Forget what depended on the victims picked so far for the gang being planned (job verdicts,
        allowed-count pools, share refusals): before it is planned again another way."""
        self._job_verdicts = {}
        self._pools = {}
        self._share_refusals = set()

    # -- admissibility ------------------------------------------------------------------
    def _dom(self, queue: str, res: dict[str, int] | None = None) -> int:
        return (res if res is not None else self.alloc.get(queue, {})).get(self.w.dominant, 0)

    def _gang_need(self, gang: Gang) -> dict[str, int]:
        """What ``gang``'s needed pods ask for in all, per resource (what a share model judges reclaim by)."""
        need = self._needs.get(gang.key)
        if need is None:
            need = self._needs[gang.key] = _sum_requests(gang.needed)
        return need

    def preference(self, pod: PodView, extra_taken: int = 0) -> Key:
        """``pod``'s victim key (``ordering.victim_key``) with ``extra_taken`` more of its job's workers taken."""
        return victim_key(job_rank(self.w.jobs[pod.job_id], extra_taken), pod)

    def order_key(self, subset: Sequence[PodView]) -> tuple[Key, ...]:
        """``ordering.sequence_key`` of ``subset``: among equally small sets, the smallest comes first."""
        return sequence_key(self.w.jobs, subset)

    def _take(self, pod: PodView, delta: int) -> None:
        """Count ``pod`` as a victim (``delta`` 1) or not any more (-1) in its job's ``taken``,
        keeping ``hit_nodes`` (nodes with candidates of a disrupted job) up to date."""
        jid = job_id(pod)
        job = self.w.jobs[jid]
        before = job.taken
        job.taken += delta
        if (before == 0) == (job.taken == 0):
            return
        hit = self.hit_nodes
        for node in {c.node_name for c in self.candidates_by_job.get(jid, ())}:
            n = hit.get(node, 0) + (1 if delta > 0 else -1)
            if n:
                hit[node] = n
            else:
                del hit[node]

    # -- allowed counts (volcano-elastic.io/worker-counts, worker-step) --------------------
    def _constrained(self, pods: Sequence[PodView]) -> bool:
        """Whether any of ``pods`` belongs to a job with allowed counts."""
        counts = self.counts
        return bool(counts) and any(p.job_id in counts for p in pods)

    def _share_queues(self, gang: Gang) -> tuple[str, ...]:
        """The queues whose victims bring ``gang``'s queue within what its share model admits: its own
        first, then (capacity, hierarchy mode) the leaves sharing the ancestor whose capability bounds
        it (``ShareModel.relieved_by``), by name. Fixed for the cycle."""
        found = self._relief.get(gang.queue)
        if found is None:
            m = self.w.model
            others = sorted({self.w.jobs[jid].queue for jid in self.candidates_by_job} - {gang.queue})
            found = self._relief[gang.queue] = (gang.queue, *(q for q in others if m.relieved_by(gang.queue, q)))
        return found

    def _own_share(self, gang: Gang, victims: Sequence[PodView]) -> int:
        """The dominant resource that ``victims`` give back to ``gang``'s queue's share (those from
        ``_share_queues``: its own queue, under proportion)."""
        dom = self.w.dominant
        queues = self._share_queues(gang)
        return sum(v.requests.get(dom, 0) for v in victims if self.w.jobs[job_id(v)].queue in queues)
