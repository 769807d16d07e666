"""The executor's unit-test world: an Executor over the in-memory API server, the actions decide()
would hand it, and the writes it made."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from elastic_controller.execute.executor import Executor, NoMetrics
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import SNAPSHOT_RESOURCES
from elastic_controller.notice import Notices
from elastic_controller.policy.actions import Evict, LiftGates
from elastic_controller.policy.cycle import shrinks
from elastic_controller.policy.decisions import Eviction, GateRelease
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.parse import parse_objects
from tests.harness import builders as b
from tests.harness.agentworld import MUTATING
from tests.harness.fakecluster import fake_kube
from tests.harness.legacy import legacy_config

EVICTED_FOR = "volcano-elastic.io/evicted-for"
DECISION = "volcano-elastic.io/last-decision"


def executor(*groups: Any, leading: list[bool] | None = None, dry_run: bool = False,
             faults: dict[str, str] | None = None) -> tuple[FakeKube, Executor]:
    kube = fake_kube(*groups)
    store = FakeStore(kube)
    cfg = legacy_config()
    recorder = EventRecorder(kube)
    lease = leading if leading is not None else [True]
    ex = Executor(kube, store, cfg, recorder, metrics=NoMetrics(),
                  notices=Notices(kube, store, cfg, recorder, clock=lambda: b.NOW), dry_run=dry_run,
                  may_write=lambda: lease[0], faults=faults or {})
    return kube, ex


def victims(*names: str, gang: str = "team-b/b") -> list[Eviction]:
    return [Eviction(f"team-a/{n}", "n1", "team-a/a", "default", gang, "test", f"uid-team-a-{n}") for n in names]


def store_snapshot(ex: Executor) -> Snapshot:
    """The executor's cache as the agent snapshots it."""
    return parse_objects([o for res in SNAPSHOT_RESOURCES for o in ex.store.items(res)], ex.cfg)[0]


def evict_action(ex: Executor, evictions: list[Eviction], now: datetime = b.NOW) -> Evict:
    """The policy's action for one gang's ``evictions`` on the executor's cache (``cycle.shrinks``:
    evict now, and the restart each job uses)."""
    (action,) = shrinks(store_snapshot(ex), ex.cfg, now, evictions)
    assert isinstance(action, Evict)
    return action


def lifts(*releases: GateRelease) -> list[LiftGates]:
    """``releases`` as the policy groups them: one ``LiftGates`` per job."""
    by_job: dict[str, list[GateRelease]] = {}
    for r in releases:
        by_job.setdefault(r.job, []).append(r)
    return [LiftGates(job, tuple(items)) for job, items in by_job.items()]


def writes(kube: FakeKube) -> list[tuple[Any, ...]]:
    return [c for c in kube.calls if c[0] in (*MUTATING, "evict") and c[1] != "events" and not c[4]]


def a_job(**kw: Any) -> list[Any]:
    return b.items(b.node("n1"), b.queue("default"), b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"], **kw))
