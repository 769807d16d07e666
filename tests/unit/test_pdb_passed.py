"""A tenant's PodDisruptionBudget over its elastic workers (issue 36, T13), on the in-memory API:
the Eviction API is tried first and other victims are preferred; when a starving gang has no other
victim, the workers above min are removed past the PDB (a DELETE, a Warning Event); masters, min
workers and rigid jobs are never taken, PDB or not."""

from __future__ import annotations

from typing import Any

from elastic_controller.agent import Agent
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS
from elastic_controller.policy import keys
from elastic_controller.policy.actions import Evict, GiveNotice
from elastic_controller.policy.cycle import decide, plan_cycle
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import Clock, fake_kube
from tests.harness.legacy import legacy_config, legacy_policy

A_WORKERS = [f"team-a/a-worker-{i}" for i in range(6)]


def world(*extra: Any) -> list[Any]:
    """Job a (elastic 2..6, all 6 running) fills n1; gang b needs 4 GPUs and has starved 10 min."""
    return b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=4, gpus=1), *extra)


def agent(kube: FakeKube, clock: Clock, cfg: ElasticConfig | None = None) -> Agent:
    return Agent(kube, FakeStore(kube), cfg or legacy_config(), EventRecorder(kube), clock=clock)


def real(kube: FakeKube, verb: str) -> list[str]:
    return sorted(f"{c[2]}/{c[3]}" for c in kube.calls if c[0] == verb and c[1] == "pods" and not c[4])


def reasons(kube: FakeKube, reason: str) -> list[str]:
    return sorted(e["involvedObject"]["name"] for e in kube.of(EVENTS) if e["reason"] == reason)


def test_a_gang_with_no_other_victim_gets_the_workers_a_pdb_holds() -> None:
    kube, clock = fake_kube(world()), Clock()
    kube.pdb_blocked = set(A_WORKERS)  # the tenant's PDB, maxUnavailable: 0 over all of a's workers
    ag = agent(kube, clock)
    first = ag.run_cycle()
    assert first.evicted == [] and "pdb" in first.failed["team-b/b"], first.failed  # the Eviction API first
    cycles = 1
    while cycles < 6 and not real(kube, "delete"):  # other victims are tried first (each refused once)
        clock.later(5)
        report = ag.run_cycle()
        cycles += 1
    # old code: "PDB refused eviction", the gang waits (and again every 60 s, forever)
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"], report.plan.starving
    assert cycles == 3  # refused: a-worker-4/5 (cycle 1), then a-worker-2/3 (cycle 2); passed in cycle 3
    assert real(kube, "delete") == ["team-a/a-worker-4", "team-a/a-worker-5"]
    assert real(kube, "evict") == []
    assert reasons(kube, "DisruptionBudgetPassed") == ["a-worker-4", "a-worker-5"]
    ann = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    assert ann[keys.LAST_SCALE_DIRECTION] == "down"  # a scale event like any other: cooldown, restart counted
    assert ann.get(keys.RESTARTS_USED) == "1"
    for name in ("a-worker-0", "a-worker-1", "a-worker-2", "a-worker-3"):
        assert kube.get(PODS, name, "team-a")["metadata"].get("deletionTimestamp") is None


def test_another_jobs_victims_are_preferred_to_passing_a_pdb() -> None:
    # Job c (elastic 2..6 on n2) has no PDB: after a's refusal, b takes c's workers; a's PDB holds.
    objs = world(b.node("n2", gpus=6), b.pytorchjob("team-c", "c", workers=6, min_r=2, max_r=6),
                 b.elastic_job("team-c", "c", min_r=2, max_r=6, nodes=["n2"]))
    snap = b.snapshot_of(objs)
    refused = frozenset(A_WORKERS)
    plan = plan_cycle(snap, legacy_config(), b.NOW, pdb_refused=refused)
    victims = [e for e in plan.evictions if e.for_gang == "team-b/b"]
    assert victims and all(e.job == "team-c/c" and not e.past_pdb for e in victims), victims


def test_min_workers_masters_and_rigid_jobs_stay_protected() -> None:
    # Gang b needs 6 GPUs; a's four workers above min are all there is past the PDB; its 2 min
    # workers are never victims, PDB or not: b waits (and nothing a PDB holds is taken for nothing).
    objs = b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=7, gpus=1))
    plan = plan_cycle(b.snapshot_of(objs), legacy_config(), b.NOW, pdb_refused=frozenset(A_WORKERS))
    assert plan.evictions == () and plan.starving[0].decision == "wait"
    kube, clock = fake_kube(objs), Clock()
    kube.pdb_blocked = set(A_WORKERS)
    ag = agent(kube, clock)
    for _ in range(4):
        ag.run_cycle()
        clock.later(5)
    assert real(kube, "delete") == [] and real(kube, "evict") == []


def test_a_victim_past_its_pdb_is_evicted_now_not_noticed() -> None:
    # Its notice's own eviction would be refused again: no notice for it, the immediate path.
    cfg = ElasticConfig(defaults=legacy_policy(noticeSeconds=60))
    snap = b.snapshot_of(world())
    out = decide(snap, cfg, b.NOW, pdb_refused=frozenset(A_WORKERS))
    assert not out.of(GiveNotice)
    evicts = out.of(Evict)
    assert len(evicts) == 1 and all(e.past_pdb for e in evicts[0].victims)
    assert all(e.to_json()["pastPdb"] is True for e in evicts[0].victims)
    plain = decide(snap, cfg, b.NOW)  # no PDB refusal: the notice as before
    assert plain.of(GiveNotice) and not plain.of(Evict)


def two_gangs() -> list[Any]:
    """n1: job a (8 workers, min 2, all refused by its PDB); n2: job c (6 workers, min 2, no PDB);
    gang b needs 2 GPUs, gang d 4: c's 4 spare workers cover d, only b needs a's workers."""
    return b.items(b.node("n1"), b.node("n2", gpus=6), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=8, min_r=2, max_r=8),
                   b.elastic_job("team-a", "a", min_r=2, max_r=8, nodes=["n1"]),
                   b.pytorchjob("team-c", "c", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-c", "c", min_r=2, max_r=6, nodes=["n2"]),
                   b.gang("team-b", "b", members=2, gpus=1), b.gang("team-d", "d", members=4, gpus=1))


def test_the_replan_past_a_pdb_serves_only_the_gangs_a_pdb_kept_waiting() -> None:
    # review B1: the whole cycle planned again with a's pods as candidates gave 6 a-pods past the PDB
    # (for b and d) and left c untouched; c's spare workers make room for one gang without the PDB
    refused = frozenset(f"team-a/a-worker-{i}" for i in range(8))
    plan = plan_cycle(b.snapshot_of(two_gangs()), legacy_config(), b.NOW, pdb_refused=refused)
    past = [e for e in plan.evictions if e.past_pdb]
    assert len(past) == 2 and all(e.job == "team-a/a" for e in past), plan.evictions
    rest = [e for e in plan.evictions if not e.past_pdb]
    assert len(rest) == 4 and all(e.job == "team-c/c" for e in rest), plan.evictions
    assert {d.pod_group: d.decision for d in plan.starving} == {"team-b/b": "evict", "team-d/d": "evict"}
    # the gang planned first keeps the first plan's victims (c's); only the one a PDB kept waiting
    # takes a's, past the PDB, after every other victim left
    assert len({e.for_gang for e in past}) == 1


def test_only_the_victims_past_a_pdb_lose_their_notice() -> None:
    # review B2: a (4..6, its PDB) on n1, c (4..6, no PDB) on n2, gang b needs 4: b takes c's two
    # spare workers and two of a's past the PDB. c relies on its notice to checkpoint: it keeps it;
    # only a's go now (their notice's eviction would be refused again)
    objs = b.items(b.node("n1", gpus=6), b.node("n2", gpus=6), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=4, max_r=6),
                   b.elastic_job("team-a", "a", min_r=4, max_r=6, nodes=["n1"]),
                   b.pytorchjob("team-c", "c", workers=6, min_r=4, max_r=6),
                   b.elastic_job("team-c", "c", min_r=4, max_r=6, nodes=["n2"]),
                   b.gang("team-b", "b", members=4, gpus=1))
    cfg = ElasticConfig(defaults=legacy_policy(noticeSeconds=300))
    out = decide(b.snapshot_of(objs), cfg, b.NOW, pdb_refused=frozenset(f"team-a/a-worker-{i}" for i in range(6)))
    evicts, notices = out.of(Evict), out.of(GiveNotice)
    assert len(evicts) == 1 and len(notices) == 1, out.actions
    assert sorted(e.job for e in evicts[0].victims) == ["team-a/a", "team-a/a"]
    assert all(e.past_pdb for e in evicts[0].victims)
    assert [r.job for r in evicts[0].restarts] == ["team-a/a"]  # c spends its restart when it leaves
    assert sorted(n.victim.job for n in notices[0].victims) == ["team-c/c", "team-c/c"]


def test_pass_pdb_off_never_passes_one() -> None:
    # agent.passPdb: false (the chart renders it so without the admission policy bounding `delete pods`)
    from elastic_controller.policy.settings import AgentConfig

    cfg = ElasticConfig(agent=AgentConfig(passPdb=False))
    plan = plan_cycle(b.snapshot_of(world()), cfg, b.NOW, pdb_refused=frozenset(A_WORKERS))
    assert plan.evictions == () and plan.starving[0].decision == "wait"
    assert "PDB refused eviction" in plan.starving[0].reason
    assert plan_cycle(b.snapshot_of(world()), legacy_config(), b.NOW, pdb_refused=frozenset(A_WORKERS)).evictions
