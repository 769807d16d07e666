"""The executor's core: every write the agent makes goes through ``Executor``, fenced by the Lease.

``fence`` first checks ``may_write`` (the Lease is held and was renewed within the renew deadline):
a leader that was paused past its Lease stops (``NotLeaderError``) before its next write. The write
helpers here (patch a PodGroup, stamp a scale event, stamp/unstamp a victim, evict, restore a stamp
only while it is still ours) are what the write paths (``evictions``, ``notices``, ``gates``,
``resume``, ``stamps``) are made of; the books (ledger of evictions in flight, PDB refusals, the
cycle's report) are kept here too, so a path is read and tested on its own with one ``Executor``.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from ..kube.api import KubeAPI, evicted_pod_ref, owner_ref
from ..kube.caches import Store
from ..kube.errors import ConflictError, InvalidError, KubeError, NotFoundError
from ..kube.events import EventRecorder
from ..kube.resources import PODGROUPS, PODS, PYTORCHJOBS, Resource
from ..notice import Notices
from ..policy import contract, keys
from ..policy.actions import SpendRestart
from ..policy.budget import next_count, previous_count
from ..policy.settings import ElasticConfig
from .faults import FAULT_ENV as FAULT_ENV
from .faults import FAULT_STEPS as FAULT_STEPS
from .faults import InjectedFault as InjectedFault
from .faults import parse_faults as parse_faults
from .metrics import AgentMetrics as AgentMetrics
from .metrics import NoMetrics as NoMetrics
from .report import CycleReport as CycleReport
from .report import InFlight as InFlight
from .writers import WRITERS, WritePool

# One logger for the agent and its executor (the JSON log's ``logger`` field is what it was before
# the executor had modules of its own).
log = logging.getLogger("elastic_controller.agent")
LEDGER_TTL = 600.0  # seconds an eviction stays "in flight" in memory without the cache confirming it
# A scale record younger than this is not judged by recovery: another writer's pod writes may not
# be in our caches yet (and our own are, as we put every answer into the caches).
RECORD_GRACE_SECONDS = 5.0
# How long a pod whose eviction a PodDisruptionBudget refused (429, dry-run or real) is no victim:
# the planner excludes it ("PDB refused eviction") so the next cycles plan other victims instead of
# the same refused plan forever. Long enough for many cycles (default interval 5 s), short enough that
# a PDB relaxed meanwhile (a replica ready again, the budget edited) is seen within a minute.
PDB_REFUSAL_SECONDS = 60.0
SCALE_KEYS = (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION, keys.LAST_DECISION)
# What an undo compares and restores: the stamp and its record (the record's id is unique per write,
# so a stamp equal to ours but written by another agent in the same second is not taken for ours).
RESTORE_KEYS = (*SCALE_KEYS, keys.SCALE_RECORD)
COPY_KEYS = (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION, keys.SCALE_RECORD)  # also on the PyTorchJob


class StampChanged(ConflictError):
    """A scale stamp not written: the PodGroup's stamp is no longer the one the plan read (another
    writer stamped it in between)."""


class NotLeaderError(Exception):
    """This replica may not write: it does not hold the Lease (or has not renewed it in time)."""


def split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


def _counted(ours: dict[str, str]) -> tuple[str, ...]:
    """The restart count among the keys of a stamp (a scale-down's), to check and take back with it."""
    return (keys.RESTARTS_USED,) if keys.RESTARTS_USED in ours else ()


def down_decision(stamp: str, n: int, gang: str, fairness: bool = False) -> str:
    """The job's ``last-decision`` for a plan evicting ``n`` of its workers for ``gang`` (``fairness``:
    the fairness scale-down's, for the least-served job ``gang``; ``contract.down``: what
    ``policy.resume.plan_stamp_for`` reads back)."""
    return contract.down(stamp, n, gang, fairness).encode()


def made_room(gang: str, fairness: bool = False) -> str:
    """What a job's scale-down Events say its workers leave for: a gang's room, or (``fairness``) the
    least-served job of its queue (the fairness scale-down, issue 38)."""
    if fairness:
        return f"to give their room to {gang}, the least-served job of the queue (fairness scale-down)"
    return f"to make room for gang {gang}"


ScaleRecord = contract.ScaleRecord  # the record's codec is the contract's (policy/contract.py)


@functools.lru_cache(maxsize=4096)  # (every cycle reads every PodGroup's record; they rarely change)
def parse_record(text: str | None) -> ScaleRecord | None:
    """The record, or None when absent or not one of ours (``ScaleRecord.decode``). Shared between
    calls: never mutate its dicts."""
    return ScaleRecord.decode(text)


def record_id(stamp: dict[str, str]) -> str:
    """The id of the scale record a stamp of ours carries ("" when none)."""
    rec = parse_record(stamp.get(keys.SCALE_RECORD))
    return rec.id if rec is not None else ""


class Executor:
    """The fenced writes and the books of the agent's execution (one per agent, kept across cycles)."""

    def __init__(self, api: KubeAPI, store: Store, cfg: ElasticConfig, recorder: EventRecorder, *,
                 metrics: AgentMetrics, notices: Notices, dry_run: bool,
                 may_write: Callable[[], bool] | None = None, faults: dict[str, str] | None = None,
                 identity: str = "", writers: int = WRITERS) -> None:
        self.api = api
        self.store = store
        self.cfg = cfg
        self.recorder = recorder
        self.metrics = metrics
        self.notices = notices
        self.dry_run = dry_run
        self.may_write = may_write or (lambda: True)
        self.faults = parse_faults(os.environ.get(FAULT_ENV)) if faults is None else faults
        self.ledger: dict[str, InFlight] = {}  # pod uid -> eviction in flight
        self.pdb_refused: dict[str, datetime] = {}  # pod ns/name -> when a PDB last refused its eviction
        self.pdb_refused_uid: dict[str, str] = {}  # pod ns/name -> the uid of the pod it refused
        self.records_seen: dict[str, datetime] = {}  # another writer's scale record id -> first seen (resume.py)
        # Who writes: in every scale record; a record by another identity newer than our first cycle
        # is a second active writer (``saw_writer``).
        self.identity = identity or f"agent_{uuid.uuid4().hex[:8]}"
        self.started: datetime | None = None  # (server) time of this agent's first cycle
        self.other_writers: dict[str, datetime] = {}  # identity -> the newest record it wrote after we started
        # Independent writes of one step (gates, records, stamps of different objects) go out
        # concurrently, each object's in order, every one fenced (writers.py).
        self.pool = WritePool(writers, stops=(NotLeaderError,))

    # ------------------------------------------------------------------ fencing and faults
    def fence(self, what: str) -> None:
        """Every write goes through here first: a replica that does not lead (any more) stops."""
        if not self.may_write():
            raise NotLeaderError(what)

    def fault(self, step: str) -> None:
        """Fault injection for tests (``VOLCANO_ELASTIC_FAULT``): sleep, raise or exit at ``step``."""
        if step not in FAULT_STEPS:
            raise ValueError(f"fault point {step!r} is not in FAULT_STEPS")
        action = self.faults.get(step)
        if action is None:
            return
        log.warning("fault injected", extra={"step": step, "action": action})
        if action.startswith("sleep:"):
            time.sleep(float(action.partition(":")[2]))
        elif action == "exit":
            os._exit(137)  # as kill -9: nothing after this runs
        else:
            raise InjectedFault(step)

    # ------------------------------------------------------------------ writes
    def patch_pg(self, key: str, annotations: dict[str, str | None]) -> dict[str, Any]:
        self.fence(f"patch podgroup {key}")
        ns, name = split(key)
        out = self.api.patch(PODGROUPS, name, {"metadata": {"annotations": annotations}}, ns)
        self.store.put(PODGROUPS, out)
        return out

    def new_record(self, path: str, gang: str, pods: dict[str, str], before: dict[str, str],
                   stamp: str) -> str:
        """A scale record (``keys.SCALE_RECORD``) for a stamp at ``stamp``: a fresh id, this writer, the
        path (evict, notice, up), the gang, the pods it acts on (ns/name -> uid) and the stamp it replaces."""
        return ScaleRecord(uuid.uuid4().hex[:16], self.identity, stamp, path, gang, pods,
                           {k: before[k] for k in SCALE_KEYS if before.get(k)}).encode()

    def stamp(self, key: str, ours: dict[str, str], *, over: dict[str, str] | None = None,
              copy: bool = True) -> None:
        """A scale event: the PodGroup's stamp (cooldown state, last-decision and the scale record,
        removed when ``ours`` has none), then its copy on the PyTorchJob (time, direction, record),
        which a PodGroup deleted by hand does not take along.

        The PodGroup's write is a compare-and-swap (``_swap_stamp``): it replaces the stamp ``over``
        (the annotations the plan read and its record names as replaced; default: the cached
        PodGroup's) and nothing newer. A stamp another writer wrote in between (issue 36, F3) is
        never overwritten: ``StampChanged`` (a 409), and the caller's undo finds no stamp of ours.
        With ``copy`` False the job's copy is left to the caller (``copy_stamp``, sent alongside its
        next writes: the copy is for people and for a PodGroup recreated, never read by a decision).

        A scale-down's restart (``restarts-used``, policy/budget.py) is never this writer's: a plan's
        stamp (one with a scale record) carries none, its restart is counted once it happened
        (``count_restart``, applying the cycle's ``SpendRestart``; issue 36, F2); a stamp without a
        record (Volcano's preemption, which happened) carries the count it writes
        (``spent_restarts``), so that ``restore_pg`` can take it back."""
        ns, name = split(key)
        job = self.store.get(PYTORCHJOBS, name, ns)
        if ours.get(keys.LAST_SCALE_DIRECTION) == keys.Direction.DOWN:
            if ours.get(keys.SCALE_RECORD) and keys.RESTARTS_USED in ours:
                raise ValueError(f"the scale-down stamp of {key} carries a scale record and {keys.RESTARTS_USED}: "
                                 "a plan's restart is counted once it happened, never with its stamp")
            if not ours.get(keys.SCALE_RECORD) and keys.RESTARTS_USED not in ours:
                raise ValueError(f"the scale-down stamp of {key} carries no {keys.RESTARTS_USED}")
        self._swap_stamp(key, {**ours, keys.SCALE_RECORD: ours.get(keys.SCALE_RECORD)}, over)
        self.fault("podgroup-stamped")
        if job is not None and copy:
            self.copy_stamp(key, ours)

    def copy_stamp(self, key: str, ours: dict[str, str]) -> None:
        """The copy of a stamp on the PyTorchJob (time, direction, record, and ``restarts-used`` when
        the stamp has it), after the PodGroup's; a failure is logged, never raised (the PodGroup's
        stamp is the one that counts)."""
        ns, name = split(key)
        if self.store.get(PYTORCHJOBS, name, ns) is None:
            return
        self.fence(f"patch pytorchjob {key}")
        copy: dict[str, str | None] = {k: ours[k] for k in (*COPY_KEYS, keys.RESTARTS_USED) if k in ours}
        copy.setdefault(keys.SCALE_RECORD, None)
        try:
            out = self.api.patch(PYTORCHJOBS, name, {"metadata": {"annotations": copy}}, ns)
        except KubeError as exc:
            log.warning("cooldown copy not written on the job", extra={"job": key, "error": str(exc)})
            return
        self.store.put(PYTORCHJOBS, out)

    def _swap_stamp(self, key: str, ours: dict[str, str | None], over: dict[str, str] | None) -> None:
        """Write ``ours`` on the PodGroup while its stamp (``RESTORE_KEYS``, and ``restarts-used``
        when ``ours`` writes it) is still ``over``, with the resourceVersion it was read at as the
        precondition: the cached PodGroup first (no GET on the fast path), the live one after a 409
        (a status update in between: compared again, written again). Raises ``StampChanged`` when
        the stamp is no longer ``over`` (said: ``saw_writer``), ``ConflictError`` when every try met
        a conflict."""
        ns, name = split(key)
        compare = (*RESTORE_KEYS, *((keys.RESTARTS_USED,) if keys.RESTARTS_USED in ours else ()))
        cached = self.store.get(PODGROUPS, name, ns)
        base = over if over is not None else \
            dict(((cached or {}).get("metadata") or {}).get("annotations") or {})
        for attempt in range(4):
            live = cached if attempt == 0 and cached is not None else self.api.get(PODGROUPS, name, ns)
            meta = live.get("metadata") or {}
            ann = meta.get("annotations") or {}
            if any(ann.get(k) != base.get(k) for k in compare):
                if live is cached and attempt == 0:
                    cached = None
                    continue  # the cache may be behind: the live object decides
                rec = parse_record(ann.get(keys.SCALE_RECORD))
                if rec is not None:
                    self.saw_writer(rec, key)
                log.info("scale stamp not written: the PodGroup's stamp changed since it was read",
                         extra={"job": key, "record": rec.id if rec else "", "by": rec.by if rec else ""})
                raise StampChanged(f"podgroup {key}: its scale stamp changed since the plan read it "
                                   f"(now {ann.get(keys.LAST_SCALE_TIME)!r} by {rec.by if rec else 'no record'})",
                                   409, "Conflict")
            self.fence(f"patch podgroup {key}")
            try:
                out = self.api.patch(PODGROUPS, name, {"metadata": {
                    "resourceVersion": str(meta.get("resourceVersion") or ""), "annotations": ours}}, ns)
            except ConflictError:
                cached = None
                continue
            self.store.put(PODGROUPS, out)
            return
        raise ConflictError(f"podgroup {key}: scale stamp not written, the PodGroup kept changing", 409, "Conflict")

    def patch_pod_annotations(self, key: str, annotations: dict[str, str | None]) -> None:
        self.fence(f"patch pod {key}")
        ns, name = split(key)
        out = self.api.patch(PODS, name, {"metadata": {"annotations": annotations}}, ns)
        self.store.put(PODS, out)

    def evict(self, key: str, uid: str | None, *, dry_run: bool = False) -> None:
        if not dry_run:
            self.fence(f"evict {key}")
        ns, name = split(key)
        self.api.evict(ns, name, uid=uid or None, dry_run=dry_run)

    def unstamp_pod(self, key: str, gang: str) -> None:
        """Remove ``evicted-for`` only while it still names ``gang`` (a JSON patch ``test``: another
        writer's value, or a newer plan's, is left alone)."""
        self.fence(f"unstamp pod {key}")
        ns, name = split(key)
        path = "/metadata/annotations/" + keys.EVICTED_FOR.replace("~", "~0").replace("/", "~1")
        try:
            out = self.api.patch(PODS, name, [{"op": "test", "path": path, "value": gang},
                                              {"op": "remove", "path": path}], ns, patch_type="json")
        except (InvalidError, NotFoundError):
            return  # not ours any more, or gone
        self.store.put(PODS, out)

    def restore_pg(self, key: str, ours: dict[str, str], before: dict[str, str]) -> bool:
        """Put the scale stamp back to ``before``, only while the PodGroup still carries ``ours`` (the
        stamp and its scale record, whose id is unique to that write: compare-and-swap on what we
        wrote, not on "a stamp like ours"): read, compare, then write with the read's resourceVersion
        as a precondition (a 409 means someone wrote in between: read again). A stamp another agent
        wrote is never overwritten (and said: ``saw_writer``). True when restored."""

        def changed(ann: dict[str, str]) -> None:
            log.info("cooldown stamp changed since ours; not restored", extra={"job": key})
            rec = parse_record(ann.get(keys.SCALE_RECORD))
            if rec is not None:
                self.saw_writer(rec, key)

        restored = self._put_back(PODGROUPS, key, RESTORE_KEYS, ours, before, changed)
        if restored is None:
            log.warning("cooldown stamp not restored: the PodGroup keeps changing", extra={"job": key})
            return False
        if restored:
            self._put_back(PYTORCHJOBS, key, COPY_KEYS, ours, before)
        return restored

    def _put_back(self, res: Resource, key: str, stamp_keys: tuple[str, ...], ours: dict[str, str],
                  before: dict[str, str], changed: Callable[[dict[str, str]], None] | None = None) -> bool | None:
        """The compare-and-swap of ``restore_pg`` on one object (the PodGroup, or the job's copy): its
        ``stamp_keys`` back to ``before`` (and the counts ``ours`` wrote back to the previous ones)
        while they still are ``ours``. True when written; False when gone, or changed since (then
        ``changed`` gets the annotations read); None when every try met a conflict."""
        ns, name = split(key)
        for _ in range(3):
            try:
                live = self.api.get(res, name, ns)
            except NotFoundError:
                return False
            ann = (live.get("metadata") or {}).get("annotations") or {}
            if any(ann.get(k) != ours.get(k) for k in (*stamp_keys, *_counted(ours))):
                if changed is not None:
                    changed(ann)
                return False
            rv = str((live.get("metadata") or {}).get("resourceVersion") or "")
            self.fence(f"restore {res.kind.lower()} {key}")
            back: dict[str, str | None] = {k: before.get(k) for k in stamp_keys}
            back.update({k: previous_count(ours[k]) for k in _counted(ours)})
            try:
                out = self.api.patch(res, name, {"metadata": {"resourceVersion": rv, "annotations": back}}, ns)
            except ConflictError:
                continue
            self.store.put(res, out)
            return True
        return None

    def count_restart(self, spend: SpendRestart) -> bool:
        """Apply one ``SpendRestart`` (a restart that happened, ``policy/restart_count.py``):
        ``restarts-used: <used>`` on the PodGroup, marked ``restart-counted: <record>``, only while the
        PodGroup still carries that record uncounted and its count is still the one the decision
        counted on (``used - 1``; compare-and-swap on its resourceVersion), then the copy on the
        PyTorchJob. Decides nothing: when the premise no longer holds it writes nothing, and the next
        cycle's decision counts again. True when counted now."""
        ns, name = split(spend.job)
        want = str(spend.used)
        # The first try compares against the cached PodGroup (our own stamp's answer is in the cache:
        # no GET on the eviction path, one round less); a cache that is behind fails the premise or
        # the resourceVersion precondition, and every later try reads the live object.
        cached = self.store.get(PODGROUPS, name, ns)
        for attempt in range(4):
            if attempt == 0:
                if cached is None:
                    continue
                live = cached
            else:
                try:
                    live = self.api.get(PODGROUPS, name, ns)
                except NotFoundError:
                    return False
            meta = live.get("metadata") or {}
            ann = meta.get("annotations") or {}
            now_rec = parse_record(ann.get(keys.SCALE_RECORD))
            if not spend.record or now_rec is None or now_rec.id != spend.record or \
                    ann.get(keys.RESTART_COUNTED) == spend.record:
                if attempt == 0:
                    continue  # (the cache may be behind: the live object decides)
                return False
            if next_count(ann) != want:
                if attempt == 0:
                    continue
                log.info("restart not counted: the count changed since the decision; next cycle decides again",
                         extra={"job": spend.job, "restartsUsed": ann.get(keys.RESTARTS_USED), "decided": want})
                return False
            self.fence(f"count restart {spend.job}")
            try:
                out = self.api.patch(PODGROUPS, name, {"metadata": {
                    "resourceVersion": str(meta.get("resourceVersion") or ""),
                    "annotations": {keys.RESTARTS_USED: want, keys.RESTART_COUNTED: spend.record}}}, ns)
            except ConflictError:
                continue
            except NotFoundError:
                return False
            self.store.put(PODGROUPS, out)
            log.info("restart counted", extra={"job": spend.job, "restartsUsed": want, "record": spend.record})
            if self.store.get(PYTORCHJOBS, name, ns) is not None:
                self.fence(f"patch pytorchjob {spend.job}")
                try:
                    job = self.api.patch(PYTORCHJOBS, name, {"metadata": {"annotations": {keys.RESTARTS_USED: want}}},
                                         ns)
                    self.store.put(PYTORCHJOBS, job)
                except KubeError as exc:  # the copy is for people; the PodGroup's count is the one read
                    log.warning("restart count copy not written on the job",
                                extra={"job": spend.job, "error": str(exc)})
            return True
        return False

    def count_restarts(self, spends: Iterable[SpendRestart]) -> None:
        """``count_restart`` for each of ``spends`` (one job's in order, different jobs' concurrently:
        ``pool``); a failure is left to the next cycle's decision, a lost Lease is raised."""
        spends = list(spends)
        for spend, done in zip(spends, self.pool.run([(s.job, functools.partial(self.count_restart, s))
                                                      for s in spends]), strict=True):
            if isinstance(done.error, KubeError):  # the next cycle's decide counts it (restart_count)
                log.warning("restart not counted this cycle", extra={"job": spend.job, "error": str(done.error)})
            elif done.error is not None:
                raise done.error

    def saw_writer(self, rec: ScaleRecord, where: str) -> bool:
        """A scale record by another identity, written after this agent's first cycle: a second
        agent writes in this cluster (leader election off, or two releases). Said once per writer
        and record: a Warning Event on the job, the ``other_writers`` alarm, a log line. True when so."""
        at = rec.time
        if rec.by == self.identity or at is None or self.started is None or \
                at < self.started.replace(microsecond=0):
            return False
        new = rec.by not in self.other_writers
        if new or at > self.other_writers[rec.by]:
            self.other_writers[rec.by] = at
            log.warning("another volcano-elastic agent writes in this cluster",
                        extra={"writer": rec.by, "identity": self.identity, "job": where, "at": rec.at})
            ref = self.job_ref(where)
            if ref is not None:
                self.recorder.emit(ref, "Warning", "SecondWriter",
                                   f"another volcano-elastic agent ({rec.by}) stamped this job at {rec.at} while "
                                   f"this one ({self.identity}) acts: two controllers run against this cluster "
                                   "(leader election off, or two releases); run one")
            self.metrics.alarm("other_writers", float(len(self.other_writers)))
        return True

    def undo(self, gang: str, before: dict[str, dict[str, str]], jobs: dict[str, dict[str, str]],
             pods: Iterable[str]) -> None:
        """Take back a plan's stamps, each only if it is still the one we wrote."""
        for p in pods:
            try:
                self.unstamp_pod(p, gang)
            except KubeError as exc:
                log.warning("could not clear evicted-for", extra={"pod": p, "error": str(exc)})
            self.fault("unstamped-one")
        for j, ours in jobs.items():
            try:
                self.restore_pg(j, ours, before.get(j, {}))
            except KubeError as exc:
                log.warning("could not restore cooldown stamp", extra={"job": j, "error": str(exc)})
            self.fault("restored-one")

    # ------------------------------------------------------------------ reads (from the caches)
    def spent_restarts(self, key: str) -> str:
        """For Volcano's own preemption (stamped outside the cycle's decision, a restart that
        happened): the count after it (``budget.next_count``) of the cached PodGroup (the PyTorchJob's
        copy is its owner's to write, never read)."""
        return next_count(self.pg_annotations(key))

    def pg_annotations(self, key: str) -> dict[str, str]:
        ns, name = split(key)
        pg = self.store.get(PODGROUPS, name, ns) or {}
        return dict((pg.get("metadata") or {}).get("annotations") or {})

    def ours(self, key: str) -> bool:
        ns, name = split(key)
        pg = self.store.get(PODGROUPS, name, ns) or {}
        return ((pg.get("metadata") or {}).get("labels") or {}).get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY

    def job_ref(self, key: str) -> dict[str, Any] | None:
        ns, name = split(key)
        job = self.store.get(PYTORCHJOBS, name, ns)
        if job is not None:
            return owner_ref(job)
        pg = self.store.get(PODGROUPS, name, ns)
        return owner_ref(pg) if pg is not None else None

    def pod_ref(self, key: str) -> dict[str, Any] | None:
        ns, name = split(key)
        pod = self.store.get(PODS, name, ns)
        return owner_ref(pod) if pod is not None else None

    # ------------------------------------------------------------------ the books
    def recent_pdb_refusals(self, now: datetime) -> frozenset[str]:
        """Pods a PDB refused to evict within the last PDB_REFUSAL_SECONDS (older refusals forgotten),
        each only while it is the pod refused (its uid): one recreated under the same name is tried
        with the Eviction API again, never deleted past a PDB that never refused it."""
        for key in [k for k, t in self.pdb_refused.items()
                    if not 0 <= (now - t).total_seconds() < PDB_REFUSAL_SECONDS]:
            del self.pdb_refused[key]
            self.pdb_refused_uid.pop(key, None)
        return frozenset(k for k in self.pdb_refused if self.pdb_refused_uid.get(k, "") == self._uid(k))

    def _uid(self, key: str) -> str:
        ns, name = split(key)
        pod = self.store.get(PODS, name, ns) or {}
        return str((pod.get("metadata") or {}).get("uid") or "")

    def refused_by_pdb(self, pod: str, gang: str, now: datetime) -> None:
        self.pdb_refused[pod] = now
        self.pdb_refused_uid[pod] = self._uid(pod)  # (the pod just refused: the store's)
        log.info("PDB refused eviction; pod is no victim for a while",
                 extra={"pod": pod, "podgroup": gang, "seconds": PDB_REFUSAL_SECONDS})

    def evicted(self, pod: str, uid: str | None, job: str, queue: str, gang: str, reason: str,
                report: CycleReport, *, resumed: bool, past_pdb: bool = False, fairness: bool = False) -> None:
        """Book one completed eviction: ledger, report, metric, log line and the pod's Event
        (``past_pdb``: removed past its PDB, ``pdb.remove``: counted with that reason alone;
        ``fairness``: a fairness scale-down's, for the least-served job ``gang``)."""
        self.ledger[uid or pod] = InFlight(pod, gang, time.monotonic())
        (report.resumed if resumed else report.evicted).append(pod)
        self.metrics.eviction(queue, "resumed" if resumed else "pdb-passed" if past_pdb else "starving-gang")
        log.info("evicted (resumed interrupted plan)" if resumed else "evicted",
                 extra={"pod": pod, "job": job, "queue": queue, "for": gang, "reason": reason})
        ref = evicted_pod_ref(*split(pod), uid) if uid else self.pod_ref(pod)
        if ref is not None:
            how = " (finishing an interrupted plan)" if resumed else ""
            why = f" ({reason})" if reason and not resumed else ""
            room = (f"for the fairness scale-down: its room goes to {gang}, the least-served job of the queue"
                    if fairness else f"to make room for gang {gang}")
            self.recorder.emit(ref, "Normal", "EvictedForGang",
                               f"elastic worker evicted by volcano-elastic {room}{how}{why}")

    def scaled_down(self, gang: str, done: list[tuple[str, str]], spends: Iterable[SpendRestart] = (), *,
                    resumed: bool = False, fairness: bool = False) -> None:
        """Book a gang's completed evictions (``done``: (job, pod)): a ``ScaledDown`` Event per job, then
        the restart each of those jobs used (``spends``: the decided ``SpendRestart`` with the record
        each stamp wrote). ``fairness``: the fairness scale-down's, for the least-served job ``gang``."""
        for j in sorted({job for job, _ in done}):
            n = sum(1 for job, _ in done if job == j)
            ref = self.job_ref(j)
            if ref is not None:
                how = " (finishing an interrupted plan)" if resumed else ""
                self.recorder.emit(ref, "Normal", "ScaledDown",
                                   f"{n} elastic worker(s) evicted {made_room(gang, fairness)}{how}; "
                                   f"cooldown starts now")
        # after the Events (a crash here leaves the count to the next cycle's decision)
        evicted = {job for job, _ in done}
        self.count_restarts(s for s in spends if s.job in evicted)
