"""The in-memory API server (``elastic_controller.kube.fake``) as the agent's unit tests set it up: a
world of ``tests.harness.builders`` objects loaded into it, a clock the test moves, a kill (kill -9) as a
chosen call reaches the server, and the agent restarted after it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.execute.executor import CycleReport
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import NAMESPACES, NODES, PODGROUPS, PODS, PYTORCHJOBS, QUEUES, Resource
from tests.harness import builders as b
from tests.harness.legacy import legacy_config

KINDS: dict[str, Resource] = {r.kind: r for r in (PODS, NODES, PODGROUPS, QUEUES, PYTORCHJOBS, NAMESPACES)}
# The verbs in FakeKube.calls that write.
WRITES = ("patch-merge", "patch-strategic", "patch-json", "create", "replace", "delete", "evict")


def load(kube: FakeKube, *groups: Any) -> FakeKube:
    """Add the objects of ``groups`` (builders' objects, or lists of them) to ``kube``."""
    for obj in b.items(*groups):
        kube.add(KINDS[obj["kind"]], obj)
    return kube


def fake_kube(*groups: Any) -> FakeKube:
    """A fresh in-memory API server holding the objects of ``groups``."""
    return load(FakeKube(), *groups)


class Clock:
    """The agent's clock, from ``builders.NOW`` until the test moves it."""

    def __init__(self) -> None:
        self.now = b.NOW

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> None:
        """``seconds`` after ``builders.NOW``."""
        self.now = b.NOW + timedelta(seconds=seconds)

    def later(self, seconds: float) -> None:
        """``seconds`` after now."""
        self.now += timedelta(seconds=seconds)


class Killed(BaseException):
    """The process dies (kill -9, not an API error): nothing catches it."""


Counted = Callable[[str, Resource, bool], bool]  # (verb, resource, dry_run): a call kill_at counts


def real_write(verb: str, res: Resource, dry_run: bool) -> bool:
    """A call that changes the server (dry-runs and Events not counted)."""
    return verb in WRITES and not dry_run and res.plural != "events"


def kill_at(kube: FakeKube, n: int, counted: Counted = real_write) -> None:
    """Kill the process as the ``n``-th (from 0) call that ``counted`` counts reaches ``kube``,
    before any other fault of ``kube`` acts on it."""
    seen = [0]

    def fault(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if counted(verb, res, dry_run):
            if seen[0] == n:
                raise Killed()
            seen[0] += 1

    kube.faults.insert(0, fault)


def real_writes(kube: FakeKube) -> list[tuple[str, str, str, str, bool]]:
    """The calls so far that changed the server (``real_write``), in order."""
    return [c for c in kube.calls if c[0] in WRITES and not c[4] and c[1] != "events"]


def restarted(kube: FakeKube, **kw: Any) -> Agent:
    """A new agent (empty memory) on ``kube``: default config, its clock at ``builders.NOW``."""
    return Agent(kube, FakeStore(kube), legacy_config(), EventRecorder(kube), clock=lambda: b.NOW, **kw)


def kill_then_restart(kube: FakeKube, agent: Agent, n: int) -> tuple[CycleReport, list[str]]:
    """Kill ``agent``'s cycle at its ``n``-th real write, then run one cycle of a restarted agent:
    that cycle's report, and the pods really evicted so far (names, sorted)."""
    kill_at(kube, n)
    with pytest.raises(Killed):
        agent.run_cycle()
    kube.faults.clear()
    report = restarted(kube).run_cycle()
    return report, sorted({c[3] for c in kube.verbs("evict", dry_run=False)})
