"""Two active agents on one cluster (issue 36, F3): the loser's "interrupted plan dropped" must
never take back the winner's real stamp. A plan's drop takes back only a stamp whose scale record is
that plan's and whose writer is this agent, or another writer gone quiet for PLAN_GRACE_SECONDS
(a crashed predecessor): compare on the record, then a compare-and-swap write.

The winner is an agent stopped right after stamping its victims' job (fault ``jobs-stamped``): as
seen by the other agent, that is a live writer between its stamp and its first eviction. The loser
sees a different world (here: a longer ``starvationSeconds``, so the gang "has not starved" to it),
finds the victims' claims and refuses to finish the plan."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.execute.resume import PLAN_GRACE_SECONDS
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import PODGROUPS, PODS
from elastic_controller.policy import keys
from elastic_controller.policy.contract import ScaleRecord
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import fake_kube
from tests.harness.legacy import legacy_config, legacy_policy

SLOW = ElasticConfig(defaults=legacy_policy(starvationSeconds=3600))  # the loser's view: b has not starved


def world() -> list[Any]:
    """Job a (elastic 2..6, all 6 running) fills n1; gang b needs 4 GPUs and has starved 10 min."""
    return b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=4, gpus=1))


def agent(kube: FakeKube, identity: str, cfg: ElasticConfig | None = None, now: datetime = b.NOW) -> Agent:
    return Agent(kube, FakeStore(kube), cfg or legacy_config(), EventRecorder(kube), clock=lambda: now,
                 identity=identity)


def stamp(kube: FakeKube) -> dict[str, str]:
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"].get("annotations") or {}
    return {k: ann[k] for k in (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION, keys.SCALE_RECORD) if k in ann}


def claimed(kube: FakeKube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.of(PODS)
                  if (p["metadata"].get("annotations") or {}).get(keys.EVICTED_FOR) == "team-b/b")


def winner_mid_plan(kube: FakeKube) -> dict[str, str]:
    """The winner stamps its plan (victims claimed, a's PodGroup stamped) and stops before evicting."""
    winner = agent(kube, "winner")
    winner.faults = {"jobs-stamped": "raise"}
    with pytest.raises(BaseException, match="jobs-stamped"):
        winner.run_cycle()
    ours = stamp(kube)
    rec = ScaleRecord.decode(ours.get(keys.SCALE_RECORD))
    assert rec is not None and rec.by == "winner" and rec.gang == "team-b/b", ours
    assert claimed(kube) == ["a-worker-4", "a-worker-5"]
    return ours


def test_the_losers_drop_leaves_the_winners_stamp_and_claims() -> None:
    kube = fake_kube(world())
    ours = winner_mid_plan(kube)
    report = agent(kube, "loser", SLOW).run_cycle()
    assert report.resumed == [] and report.evicted == []
    assert stamp(kube) == ours  # old code: the stamp was taken back (direction and record removed)
    assert claimed(kube) == ["a-worker-4", "a-worker-5"]  # the winner's claims stay too
    assert not [c for c in kube.calls if c[0] == "evict" and not c[4]]
    # The winner goes on (a cycle of its own: it finds its claims and finishes): the cooldown is real.
    finisher = agent(kube, "winner")
    done = finisher.run_cycle()
    assert sorted(done.resumed) == ["team-a/a-worker-4", "team-a/a-worker-5"], done
    assert stamp(kube) == ours


def test_a_crashed_writers_plan_is_still_dropped_once_it_is_old() -> None:
    # A predecessor that died: after PLAN_GRACE_SECONDS nobody runs its plan; the drop takes its
    # stamp back (the gang is never left behind a cooldown of evictions that did not happen).
    kube = fake_kube(world())
    winner_mid_plan(kube)
    later = b.NOW + timedelta(seconds=PLAN_GRACE_SECONDS + 1)
    report = agent(kube, "successor", SLOW, now=later).run_cycle()
    assert report.resumed == [] and report.evicted == []
    assert keys.LAST_SCALE_DIRECTION not in stamp(kube) and claimed(kube) == []


def test_an_agent_drops_its_own_plan_at_once() -> None:
    kube = fake_kube(world())
    winner_mid_plan(kube)
    report = agent(kube, "winner", SLOW).run_cycle()  # the same identity, its view changed
    assert report.resumed == []
    assert keys.LAST_SCALE_DIRECTION not in stamp(kube) and claimed(kube) == []


def test_a_stamp_of_another_plan_is_never_taken_back_for_a_forged_claim() -> None:
    # A claim on a pod the stamp's record does not name (written by hand, or left by an older plan)
    # drops that claim only: the job's real stamp, for the same gang, stays.
    kube = fake_kube(world())
    ours = winner_mid_plan(kube)
    forged = kube.get(PODS, "a-worker-3", "team-a")
    forged["metadata"]["annotations"][keys.EVICTED_FOR] = "team-b/b"
    kube.add(PODS, forged)
    later = b.NOW + timedelta(seconds=PLAN_GRACE_SECONDS + 1)
    agent(kube, "successor", SLOW, now=later).run_cycle()
    assert stamp(kube) == ours
    assert claimed(kube) == []
