"""Gate releases (scale up): lift the scale-up gate of elastic pods when capacity is free.

ARCHITECTURE.md, "The agent's cycle", step 5: nothing while a waiting gang could be placed by evicting elastic workers
(``blocking_gangs`` says which), except that the room of such a gang that fits on free capacity now
is set aside and growth goes on around it;
only jobs running their min set, out of cooldown and snooze; a job in its first rendezvous first
(no restart), then the least fulfilled, then lowest index (``ordering.scale_up_key``); each job to the
largest allowed size that fits now, in one scale event, when that is worth a restart
(``minScaleUpGain``, ``scaleUpAfterCheckpointSeconds``); at most ``maxScaleUpPerCycle`` jobs per
queue; growth held back gets a note that says why.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import timedelta

from .cooldowns import cooldown_remaining
from .decisions import GateRelease, HoldNote, HoldReason
from .fit import Capacity, fits_all, place_all, pod_demand
from .keys import LAST_SCALE_DIRECTION, Direction
from .model import JobView, PodView, newest_checkpoint
from .ordering import ScaleUpKey, scale_up_key, scale_up_pod_rank
from .quantity import add, sub
from .times import format_time
from .world import Gang, JobState, World, job_id

# Said after a relaxed rule in a reason (the job's queue's inPlace* key applied: settings.QueuePolicy).
IN_PLACE_SAID = " (it resizes in place: an event costs seconds, no restart, no work lost)"


def queue_may_give(world: World, gang_queue: str, queue: str) -> bool:
    """Whether elastic workers of ``queue`` may ever be victims for a gang of ``gang_queue``
    (ARCHITECTURE.md, "The agent's cycle", step 3: the same queue, or a reclaimable queue above its
    deserved share while the gang's queue is below its own; ``gang_queue`` "" takes the latter as
    given). Cooldowns and minimum runtimes pass: they are not checked."""
    if queue == gang_queue:
        return True
    m = world.model
    if not m.reclaimable(queue) or (gang_queue and not m.below_share(gang_queue, m.allocated(gang_queue))):
        return False
    return m.overused(queue, m.allocated(queue))


def _merged(parts: Iterable[Mapping[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """node -> resources, summed over ``parts`` (one capacity update per node, not per part)."""
    out: dict[str, dict[str, int]] = {}
    for part in parts:
        for node, demand in part.items():
            out[node] = add(out.get(node, {}), demand)
    return out


def _needed(g: Gang) -> dict[str, int]:
    """What ``g``'s needed pods ask for in all, per resource."""
    out: dict[str, int] = {}
    for p in g.needed:
        out = add(out, p.requests)
    return out


def blocking_gangs(world: World, sizes: Mapping[str, int] | None = None,
                   among: Collection[Gang] | None = None) -> list[Gang]:
    """Waiting gangs that evicting elastic workers could get placed: they would fit if every
    running elastic worker that may ever be a victim for them (a job of no higher priority, from a
    queue the gang may take from, that ``World.never_victim`` does not rule out: running at least
    its queue's minWorkersToShrink, with an allowed count below its size) were gone, and
    Volcano's proportion plugin would then admit them (their queue's allocation within its deserved
    share once its own such workers are gone).

    A gang that cannot be placed even then does not hold back scale-up: growing other jobs into
    idle capacity takes nothing from it (what grows is elastic, and reclaimable later).

    ``sizes``: job key -> the size to judge the job at (a growth the gates consider: its running
    workers are then freeable if it would be a victim at that size; its new pods take from and give
    back to the same capacity, so they need no counting). ``among``: only these gangs (default: every
    waiting one)."""
    sizes = sizes or {}
    complete = [g for g in (world.waiting if among is None else among)
                if len(g.needed) >= g.pg.min_member - g.placed]
    if not complete:
        return []  # no gang could be placed: the capacity below is not worth building
    dom = world.dominant
    # Running elastic workers summed per (queue, job priority, node): one update per node, not per pod.
    freed: dict[tuple[str, int], dict[str, dict[str, int]]] = {}
    barred: dict[str, bool] = {}
    ghosts = world.ghosts
    for pod in world.elastic_holding:
        if ghosts and pod.key in ghosts:
            continue  # on a lost node: never a victim, and what it holds no gang can use
        never = barred.get(pod.job_id)
        if never is None:
            never = barred[pod.job_id] = world.never_victim(pod.job_id, sizes.get(pod.job_id)) is not None
        if never:
            continue  # never a victim this cycle (minWorkersToShrink, allowed counts): frees nothing for a gang
        job = world.jobs.get(pod.job_id)
        kind = (job.queue, job.priority) if job is not None else (world.cfg.defaultQueue, 0)
        per_node = freed.get(kind)
        if per_node is None:
            per_node = freed[kind] = {}
        acc = per_node.get(pod.node_name)
        if acc is None:
            acc = per_node[pod.node_name] = {}
        for k, v in pod.demand.items():
            acc[k] = acc.get(k, 0) + v
    base: Capacity | None = None
    maximal: Capacity | None = None
    capacities: dict[tuple[str, int, bool], Capacity] = {}  # per (gang queue, gang priority, below share)
    others: dict[tuple[bool, int], Capacity] = {}  # what other queues give, per (below share, priority)
    # Gangs alike (queue, priority, needed pods' requests, selector, tolerations) get the same answer.
    verdicts: dict[tuple[object, ...], bool] = {}
    own_freed: dict[tuple[str, int], int] = {}  # per (queue, priority): what its own workers would free
    out = []
    for g in complete:
        excess = world.share_excess(g)
        if excess > 0:
            own = own_freed.get((g.queue, g.priority))
            if own is None:
                own = own_freed[(g.queue, g.priority)] = sum(  # its own queue's (and what relieves it)
                    acc.get(dom, 0) for (queue, prio), per_node in freed.items()
                    if (queue == g.queue or world.model.relieved_by(g.queue, queue)) and prio <= g.priority
                    for acc in per_node.values())
            if own < excess:
                continue  # proportion keeps it out until its queue's own jobs shrink or finish
        pods_shape = tuple(sorted(
            (tuple(sorted(p.requests.items())), tuple(sorted(p.node_selector.items())), p.tolerations)
            for p in g.needed))
        shape = (g.queue, g.priority, pods_shape)
        if shape not in verdicts:
            # Quick answers first: every capacity below lies between the base (nothing freed) and the
            # maximal one (every running elastic worker freed), whatever the queue and priority.
            if base is None:
                base = world.future_capacity()
            if ("base", pods_shape) not in verdicts:
                verdicts[("base", pods_shape)] = fits_all(g.needed, base)
            if verdicts[("base", pods_shape)]:
                verdicts[shape] = True
                out.append(g)
                continue
            if ("max", pods_shape) not in verdicts:
                if maximal is None:
                    maximal = base.copy()
                    maximal.give_many(_merged(freed.values()))
                verdicts[("max", pods_shape)] = fits_all(g.needed, maximal)
            if not verdicts[("max", pods_shape)]:
                verdicts[shape] = False
                continue
            # Other queues give only to a gang whose queue is below its share (for the gang: the
            # capacity plugin weighs its request), and then every one of them that may give does:
            # that part is shared by all such gangs of one priority.
            below = world.model.below_share(g.queue, world.model.allocated(g.queue), _needed(g))
            cap = capacities.get((g.queue, g.priority, below))
            if cap is None:
                shared = others.get((below, g.priority))
                if shared is None:
                    if base is None:
                        base = world.future_capacity()
                    shared = others[(below, g.priority)] = base.copy()
                    shared.give_many(_merged(per_node for (queue, prio), per_node in freed.items()
                                             if below and prio <= g.priority and queue_may_give(world, "", queue)))
                cap = capacities[(g.queue, g.priority, below)] = shared.copy()
                cap.give_many(_merged(per_node for (queue, prio), per_node in freed.items()
                                      if queue == g.queue and prio <= g.priority))
            verdicts[shape] = fits_all(g.needed, cap)
        if verdicts[shape]:
            out.append(g)
    return out


def snoozed(world: World, job: JobState) -> bool:
    """A job shrunk for a gang is not grown again before its queue's scaleUpSnoozeSeconds."""
    pg = job.pg
    if pg is None or pg.last_scale is None or pg.annotations.get(LAST_SCALE_DIRECTION) != Direction.DOWN.value:
        return False
    return (world.now - pg.last_scale).total_seconds() < world.policy(job.queue).snooze_seconds(job.in_place)


def _resting_note(world: World, job: JobState, views: dict[str, JobView]) -> HoldNote:
    """Why ``job`` (in cooldown or snoozed: ``job.cooling or snoozed``) is not grown this cycle, with
    the time it may grow again: the later of its cooldown's end and its snooze's (both when equal,
    the snooze: it says more). Built only for a job with gated pods below its max. ``views``: the
    snapshot's PyTorchJobs by key, filled on first use (the cooldown stamp may be on the job)."""
    policy = world.policy(job.queue)
    head = _stays(job, job.current_workers())
    cool_end = snooze_end = None
    if job.cooling:
        if not views and world.snapshot.jobs:
            views.update((v.key, v) for v in world.snapshot.jobs)
        left = cooldown_remaining(job.pg, policy, world.now, views.get(job.job_ref), job.in_place)
        cool_end = world.now + timedelta(seconds=left)
    if snoozed(world, job):
        assert job.pg is not None and job.pg.last_scale is not None
        snooze_end = job.pg.last_scale + timedelta(seconds=policy.snooze_seconds(job.in_place))
    cooldown = policy.key_of("cooldownSeconds", job.in_place)
    if snooze_end is not None and (cool_end is None or snooze_end >= cool_end):
        assert job.pg is not None and job.pg.last_scale is not None
        unset = "" if policy.scaleUpSnoozeSeconds is not None else f" (unset: its queue's {cooldown})"
        return HoldNote(head + (
            f"snoozed until {format_time(snooze_end)} (shrunk at {format_time(job.pg.last_scale)}; "
            f"scaleUpSnoozeSeconds {policy.snooze_seconds(job.in_place)}{unset}: a job shrunk for a gang is not "
            "grown straight back)"), job.key, HoldReason.SNOOZED, snooze_end)
    assert cool_end is not None
    return HoldNote(head + (f"in cooldown until {format_time(cool_end)} ({cooldown} "
                            f"{policy.cooldown_seconds(job.in_place)} after its last scale event"
                            f"{IN_PLACE_SAID if cooldown != 'cooldownSeconds' else ''})"), job.key,
                    HoldReason.COOLDOWN, cool_end)


def held_by_job(world: World) -> tuple[dict[str, list[PodView]], dict[str, str]]:
    """The gated elastic pods of jobs running at least their min (job -> pods, in the world's order)
    and each such job's PodGroup key: what may grow, for the gate releases and the fairness scale-down."""
    gate = world.cfg.gating.gateName
    by_job: dict[str, list[PodView]] = {}
    group_of: dict[str, str] = {}
    for key, (held, running) in world.gated_elastic().items():
        pg = world.podgroups.get(key)
        if pg is None or running < pg.min_member:
            continue
        for pod in held:
            if pod.gated(gate):
                by_job.setdefault(job_id(pod), []).append(pod)
            group_of[job_id(pod)] = key
    return by_job, group_of


def checkpoint_age(world: World, job: JobState, group: str, window: int | None) -> float | None:
    """Seconds since ``job``'s last published checkpoint (``volcano-elastic.io/last-checkpoint-time``
    on its PodGroup or a pod), or None: none published, or no ``scaleUpAfterCheckpointSeconds``
    window to check it against (growing it then waits for nothing)."""
    if window is None:
        return None
    last = newest_checkpoint(None, job.pg, world.pods_by_group.get(group, ()))
    return None if last is None else (world.now - last).total_seconds()


def _first_rendezvous(world: World, job: JobState, group: str) -> bool:
    """Whether ``job`` is still in its first rendezvous: never scaled, and its gang placed within its
    queue's firstRendezvousSeconds (torchrun's c10d rendezvous waits ``last_call_timeout`` after its
    min nodes joined for more to come; workers joining then cost no restart)."""
    if job.pg is None or job.pg.last_scale is not None:
        return False
    times = [p.scheduled_at for p in world.pods_by_group.get(group, ()) if p.placed and p.scheduled_at]
    if not times:
        return False
    started = min(times)  # its first placed pod (the master and core workers are never evicted)
    return (world.now - started).total_seconds() <= world.policy(job.queue).firstRendezvousSeconds


def _fed_gang(world: World, job: JobState, target: int, promoted: Mapping[str, int],
              spared: Collection[Gang]) -> Gang | None:
    """A waiting gang of ``spared`` (not blocking: nothing evictable gets it placed) that growing
    ``job`` to ``target`` workers would make placeable by evicting (with the jobs of ``promoted``, grown
    this cycle past their never-a-victim size, at their new sizes): the first such, or None. Issue 19:
    the agent never grows a job that a starving gang is about to need (it would grow into the gang's
    room, then restart again when evicted for it)."""
    among = [g for g in spared if g.priority >= job.priority and queue_may_give(world, g.queue, job.queue)]
    if not among:
        return None
    found = blocking_gangs(world, {**promoted, job.key: target}, among)
    return found[0] if found else None


def _next_fits(world: World, job: JobState, pod: PodView, cap: Capacity, placed: Mapping[str, dict[str, int]],
               ) -> bool:
    """Whether ``job`` is below its max and its next gated pod ``pod`` would be released now (it fits on
    a node and in its queue's share): only such a job gets a note for growth held back (not every job
    of a full cluster)."""
    assert job.bounds is not None
    return (job.current_workers() < job.bounds.max_replicas and cap.choose_node(pod) is not None
            and world.model.admits(job.queue, pod.requests, placed))


def _order_text(job: JobState) -> str:
    """How the scale-up order put ``job`` here (ordering.scale_up_key), for its release's reason."""
    if job.by_service:
        return f"least served job first: {job.served / 3600:.1f} GPU-hours attained"
    return "least fulfilled job first"


def _stays(job: JobState, now_workers: int) -> str:
    """The head of a note for ``job``, held at ``now_workers``."""
    assert job.bounds is not None
    return f"job {job.key} stays at {now_workers} of max {job.bounds.max_replicas} workers: "


def _gate_limit_note(jid: str, job: JobState, now_workers: int, budget: int, lifted: int,
                     wanted: int = 0) -> HoldNote:
    more = f" ({wanted} more would pass it)" if wanted else ""
    return HoldNote(_stays(job, now_workers) + (
        f"the agent already lifts {lifted} gates this cycle, agent.maxGateReleasesPerCycle {budget}{more}; "
        "it is considered again next cycle (a job grows whole or not at all)"), jid,
        HoldReason.CYCLE_GATE_LIMIT)


def plan_gate_releases(world: World, capacity: Capacity | None = None, evicted_for: Collection[str] = (),
                       ) -> tuple[list[GateRelease], list[str], list[HoldNote]]:
    """(releases in decision order, keys of the gangs that block scale-up, notes: growth held back
    and why, one per job at most: in cooldown or snoozed (by job key), then in decision order its
    queue's maxScaleUpPerCycle used up, its checkpoint too old, a growth not worth a restart or to
    no allowed count, or held below a size a waiting gang would need; the first three only for a
    job whose next gated pod fits now). Notes change no decision.

    A blocking gang whose needed pods fit on free capacity now (the scheduler is about to place
    it, or it waits for room in its queue's share) has that room reserved, and growth goes on
    around it; any other blocking gang holds back all growth. A pod is released only while its
    queue stays where Volcano would place it (``ShareModel.admits``: within its deserved share as the
    proportion plugin counts it; within its real capability and its ancestors' under capacity; beyond,
    Volcano would leave it pending and the job would have spent a scale event for nothing). Gangs in
    ``evicted_for`` (victims were chosen for them this cycle) count as blocking.

    A job that no gang may take from at its size (``World.never_victim``: below its queue's
    minWorkersToShrink, or no allowed count below it) grows to a size where it could be a victim only
    when that would make no other waiting gang placeable by evicting it (``_fed_gang``); otherwise it
    grows at most to the largest size that keeps it out of reach, and a note says why. A job left at a
    count outside its allowed counts (part of a victim group evicted) grows to the largest allowed
    count that fits without the minScaleUpGain test."""
    if not world.cfg.gating.enabled:
        return [], [], []
    cap = (capacity or world.free_now).copy()
    blocking = {g.key for g in blocking_gangs(world)} | set(evicted_for)
    notes: list[HoldNote] = []
    blocked: list[str] = []
    # Per queue: what this cycle places in it besides the snapshot (blocking gangs' room set aside,
    # released pods), which the share model weighs with it (``ShareModel.admits``).
    placed: dict[str, dict[str, int]] = {}

    for g in world.waiting:
        if g.key not in blocking:
            continue
        if place_all(g.needed, cap) is None:
            blocked.append(g.key)
        else:  # its room is set aside, on the nodes and in its queue's share
            placed[g.queue] = add(placed.get(g.queue, {}), _needed(g))
    if blocked:
        return [], blocked, []
    by_job, group_of = held_by_job(world)
    # ordering.scale_up_key: jobs in their first rendezvous first (growing them costs no restart),
    # then least fulfilled, then lowest pending index and name: a total order, whatever order the
    # groups come in.
    order: list[ScaleUpKey] = []
    first_of: dict[str, bool] = {}
    resting: list[str] = []  # jobs in cooldown or snoozed that could grow now: a note each
    for jid, pods in by_job.items():
        job = world.jobs.get(jid)
        if job is None or job.bounds is None:
            continue
        if job.cooling or snoozed(world, job):
            if _next_fits(world, job, min(pods, key=scale_up_pod_rank), cap, placed):
                resting.append(jid)
            continue
        pods.sort(key=scale_up_pod_rank)
        first = first_of[jid] = _first_rendezvous(world, job, group_of[jid])
        order.append(scale_up_key(first, job, pods[0], jid))
    order.sort()
    per_queue: dict[str, int] = {}  # jobs grown per queue this cycle (each is one scale event)
    releases: list[GateRelease] = []
    spared: list[Gang] | None = None  # waiting gangs not blocking (computed on first use)
    promoted: dict[str, int] = {}  # jobs grown this cycle out of never_victim: their new sizes
    if resting:  # first, by job key (whatever order the groups come in)
        views: dict[str, JobView] = {}
        notes.extend(_resting_note(world, world.jobs[jid], views) for jid in sorted(resting))
    for *_, jid in order:
        job = world.jobs[jid]
        assert job.bounds is not None
        policy = world.policy(job.queue)
        now_workers = job.current_workers()
        if per_queue.get(job.queue, 0) >= policy.maxScaleUpPerCycle:
            if _next_fits(world, job, by_job[jid][0], cap, placed):
                limit = policy.maxScaleUpPerCycle
                notes.append(HoldNote(_stays(job, now_workers) + (
                    f"queue {job.queue} has maxScaleUpPerCycle 0 (its jobs do not grow)" if limit == 0 else
                    f"queue {job.queue} already grew maxScaleUpPerCycle {limit} job(s) this cycle "
                    "(in scale-up order); it is considered again next cycle"), jid, HoldReason.QUEUE_SCALE_UP_LIMIT))
            continue
        budget = world.cfg.agent.maxGateReleasesPerCycle
        if releases and len(releases) >= budget:
            if _next_fits(world, job, by_job[jid][0], cap, placed):
                notes.append(_gate_limit_note(jid, job, now_workers, budget, len(releases)))
            continue
        first = first_of[jid]
        window = policy.checkpoint_window(job.in_place)  # (none for a job resized in place: inplace.py)
        age = checkpoint_age(world, job, group_of[jid], window)
        if not first and age is not None and window is not None and age > window:
            # a restart now would lose the work since its last checkpoint: wait for the next one
            if _next_fits(world, job, by_job[jid][0], cap, placed):
                # The checkpoint's time, not its age: the note stays the same from cycle to cycle (the
                # agent logs a note at INFO only when its text is new).
                last = format_time(world.now - timedelta(seconds=age))
                notes.append(HoldNote(_stays(job, now_workers) + (
                    f"its last checkpoint, at {last}, is older than scaleUpAfterCheckpointSeconds {window}: "
                    "growing now would lose the work since; it waits for its next checkpoint"), jid,
                    HoldReason.CHECKPOINT_TOO_OLD))
            continue
        # The largest size that fits now: lowest indexes first, each where it fits (capacity only
        # shrinks as pods are placed, so the first pod that does not fit ends the job's growth).
        taken: list[tuple[PodView, str]] = []
        for pod in by_job[jid]:
            if now_workers + len(taken) >= job.bounds.max_replicas:
                break
            if not world.model.admits(job.queue, pod.requests, placed):
                # Volcano would leave it pending: its queue is at its deserved share (proportion) or
                # its real capability, or an ancestor's (capacity)
                break
            node = cap.choose_node(pod)
            if node is None:
                break
            placed[job.queue] = add(placed.get(job.queue, {}), pod.requests)
            cap.take(node, pod_demand(pod))
            taken.append((pod, node))
        # Only to a world size the training can use (volcano-elastic.io/worker-counts or -step).
        allowed = job.pg.worker_sizes.allowed(job.bounds.min_replicas, job.bounds.max_replicas) \
            if job.pg is not None else None
        target = now_workers + len(taken)
        constrained = allowed is not None and not allowed.every
        if allowed is not None and constrained:
            floor = allowed.floor(target)
            target = floor if floor is not None and floor > now_workers else now_workers
        # A count outside its allowed counts (part of a victim group was evicted and the rest not):
        # the job cannot use it and restarts at its next scale event anyway.
        off_count = allowed is not None and constrained and bool(allowed.counts) and now_workers not in allowed
        hold = hold_why = ""
        if target > now_workers and world.never_victim(jid) is not None and world.never_victim(jid, target) is None:
            if spared is None:
                spared = [g for g in world.waiting if g.key not in blocking]
            fed = _fed_gang(world, job, target, promoted, spared)
            if fed is None:
                promoted[jid] = target
            else:
                # The largest size below the one that makes it a victim (a never_victim size; with
                # allowed counts, an allowed one).
                below = next((n for n in range(target - 1, now_workers, -1)
                              if (allowed is None or not constrained or n in allowed)
                              and world.never_victim(jid, n) is not None), now_workers)
                counts = f", allowed counts {allowed.describe()}" if allowed is not None and constrained else ""
                shrink_key = policy.key_of("minWorkersToShrink", job.in_place)
                hold_why = (f"not to {target} although it fits: at {target} workers it could be evicted "
                            f"({shrink_key} {policy.min_workers_to_shrink(job.in_place)}{counts}) and waiting gang "
                            f"{fed.key} "
                            f"would be placed by evicting it; the agent does not grow a job a starving gang is "
                            f"about to need (a restart to grow, another when evicted)")
                hold = f"of max {job.bounds.max_replicas} workers, {hold_why}"
                target = below
        gain = (target - now_workers) / max(1, now_workers)
        min_gain = policy.min_scale_up_gain(job.in_place)
        gain_key = policy.key_of("minScaleUpGain", job.in_place)
        worth = "worth a resize in place" if gain_key != "minScaleUpGain" else "worth a restart"
        if target == now_workers or (not first and not off_count and gain < min_gain):
            if hold:
                notes.append(HoldNote(f"job {jid} stays at {now_workers} {hold}" + (
                    "" if target == now_workers else f" ({target} would not be {worth})"), jid,
                    HoldReason.GANG_NEEDS_IT))
            elif target > now_workers:
                notes.append(HoldNote(_stays(job, now_workers) + (
                    f"{target} fit now, but +{gain:.0%} is below {gain_key} {min_gain:g} "
                    f"(not {worth}); the room goes to the next job"), jid, HoldReason.BELOW_MIN_GAIN))
            elif taken and allowed is not None:  # some fit, but no allowed count between
                notes.append(HoldNote(_stays(job, now_workers) + (
                    f"{now_workers + len(taken)} fit now, but no count from {now_workers + 1} to "
                    f"{now_workers + len(taken)} is one of its allowed counts ({allowed.describe()}); "
                    "the room goes to the next job"), jid, HoldReason.NO_ALLOWED_COUNT))
            keep = 0  # not worth a restart (or no valid size): the room goes back to the next jobs
        else:
            keep = target - now_workers
        for pod, node in taken[keep:]:
            cap.give(node, pod_demand(pod))
            placed[job.queue] = sub(placed[job.queue], pod.requests)
        taken = taken[:keep]
        if not taken:
            continue
        if releases and len(releases) + len(taken) > budget:  # whole or not at all: the next cycle
            for pod, node in taken:
                cap.give(node, pod_demand(pod))
                placed[job.queue] = sub(placed[job.queue], pod.requests)
            notes.append(_gate_limit_note(jid, job, now_workers, budget, len(releases), len(taken)))
            continue
        job.added += len(taken)
        per_queue[job.queue] = per_queue.get(job.queue, 0) + 1
        if hold:
            notes.append(HoldNote(f"job {jid} grows to {target} {hold}", jid, HoldReason.GANG_NEEDS_IT))
        sizes = f" (allowed counts {allowed.describe()})" if allowed is not None and constrained else ""
        after = ("" if age is None else
                 f", checkpointed {age:.0f}s ago (within scaleUpAfterCheckpointSeconds {window})")
        if first:
            why = ("in its first rendezvous (its gang was placed within firstRendezvousSeconds "
                   f"{policy.firstRendezvousSeconds}s and it was never scaled): no restart")
        elif off_count and gain < min_gain:
            why = (f"its {now_workers} workers are not one of its allowed counts (part of a victim group was "
                   f"evicted, the rest not): it cannot use that size and restarts at its next scale event "
                   f"anyway, so the {gain_key} {min_gain:g} test does not apply{after}")
        elif gain_key != "minScaleUpGain":
            why = (f"+{gain:.0%} workers, at least {gain_key} {min_gain:g}{after}{IN_PLACE_SAID}: "
                   f"{worth}")
        else:
            why = f"+{gain:.0%} workers, at least minScaleUpGain {min_gain:g}{after}: worth a restart"
        if hold:
            why += f"; {hold_why}"
        for pod, node in taken:
            releases.append(GateRelease(
                pod.key, jid, node, job.queue,
                f"job {jid} grows from {now_workers} to {target} of max {job.bounds.max_replicas} workers{sizes} in "
                f"one scale event (the most that fits now, "
                f"{'jobs in their first rendezvous first' if first else _order_text(job)}), {why}; "
                f"fits on {node} now",
            ))
    return releases, [], notes
