"""The eviction notice, agent side (elastic_controller.notice) against the in-memory API."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from elastic_controller.config import parse_config
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import NODES, PODGROUPS, PODS, PYTORCHJOBS, QUEUES, Resource
from elastic_controller.notice import GiveResult, Notices
from elastic_controller.policy import keys
from elastic_controller.policy.actions import GiveNotice
from elastic_controller.policy.cycle import shrinks
from elastic_controller.policy.decisions import Eviction
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.parse import parse_objects
from tests.harness import builders as b
from tests.harness.legacy import LEGACY

KINDS: dict[str, Resource] = {r.kind: r for r in (PODS, NODES, PODGROUPS, QUEUES, PYTORCHJOBS)}
CFG = parse_config({"defaults": LEGACY, "queues": {"research": {"noticeSeconds": 120}}})  # others: no notice
T = b.NOW


def setup() -> tuple[FakeKube, Notices, EventRecorder]:
    kube = FakeKube()
    objs = [b.node("n0"), b.node("n1"), b.queue("research"), b.queue("default"),
            *b.elastic_job("ns", "a", min_r=2, max_r=4, nodes=["n0"], queue="research"),
            b.pytorchjob("ns", "a", workers=4, min_r=2, max_r=4, queue="research"),
            *b.gang("ns", "g", members=2, gpus=4)]
    for obj in b.items(objs):
        kube.add(KINDS[obj["kind"]], obj)
    rec = EventRecorder(kube)
    return kube, Notices(kube, FakeStore(kube), CFG, rec, clock=lambda: T), rec


def victim(i: int) -> Eviction:
    return Eviction(pod=f"ns/a-worker-{i}", node="n0", job="ns/a", queue="research", for_gang="ns/g",
                    reason="elastic worker of an over-share job", uid=f"uid-ns-a-worker-{i}")


def give(kube: FakeKube, notices: Notices, victims: list[Eviction], now: datetime = T,
         gang: str = "ns/g") -> GiveResult:
    """The policy's ``GiveNotice`` for ``victims`` (``cycle.shrinks``: each deadline), given by ``Notices``."""
    (action,) = shrinks(snapshot(kube), CFG, now, [replace(v, for_gang=gang) for v in victims])
    assert isinstance(action, GiveNotice)
    return notices.give(action.gang, action.victims, now)


def annotations(kube: FakeKube, pod: str) -> dict[str, str]:
    return dict(kube.get(PODS, pod, "ns")["metadata"].get("annotations") or {})


def snapshot(kube: FakeKube) -> Snapshot:
    objs = [o for res in KINDS.values() for o in kube.of(res)]
    snap, _ = parse_objects(objs, CFG)
    return snap


def events(rec: EventRecorder) -> list[tuple[str, str, str]]:
    return [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in rec.emitted]


def test_give_stamps_dry_runs_and_tells_pod_and_job() -> None:
    kube, notices, rec = setup()
    result = give(kube, notices, [victim(3), victim(2)])
    assert result.failed == "" and result.noticed == ["ns/a-worker-3", "ns/a-worker-2"]
    deadline = T + timedelta(seconds=120)
    for i in (2, 3):
        ann = annotations(kube, f"a-worker-{i}")
        assert ann[keys.EVICTED_FOR] == "ns/g" and ann[keys.EVICT_AFTER] == b.ts(deadline)
    assert notices.given == {"uid-ns-a-worker-3": deadline, "uid-ns-a-worker-2": deadline}
    # every eviction was dry-run before any stamp, none for real
    assert [c[0] for c in kube.calls if c[0] == "evict"] == ["evict", "evict"]
    assert all(c[4] for c in kube.verbs("evict"))
    assert events(rec) == [("Pod", "a-worker-3", "EvictionNotice"), ("Pod", "a-worker-2", "EvictionNotice"),
                           ("PyTorchJob", "a", "EvictionNotice")]
    assert "evicts this pod at 2026-01-01T13:02:00Z (in 120s) to make room for gang ns/g" in rec.emitted[0]["message"]
    assert "2 elastic worker(s) (a-worker-3, a-worker-2)" in rec.emitted[2]["message"]


def test_no_notice_for_an_eviction_a_pdb_refuses() -> None:
    kube, notices, rec = setup()
    kube.pdb_blocked.add("ns/a-worker-2")
    result = give(kube, notices, [victim(3), victim(2)])
    assert result.failed.startswith("pdb:") and result.noticed == []
    assert keys.EVICT_AFTER not in annotations(kube, "a-worker-3")
    assert not kube.verbs("patch-merge") and rec.emitted == [] and notices.given == {}


def test_a_failed_stamp_undoes_the_others() -> None:
    kube, notices, rec = setup()
    kube.faults.append(raise_on("patch-merge", "pods", "a-worker-2"))
    result = give(kube, notices, [victim(3), victim(2)])
    assert result.failed.startswith("error:") and result.noticed == []
    for i in (2, 3):
        ann = annotations(kube, f"a-worker-{i}")
        assert keys.EVICT_AFTER not in ann and keys.EVICTED_FOR not in ann
    assert rec.emitted == []


def test_a_pending_notice_is_left_alone_then_evicted_when_it_ends() -> None:
    kube, notices, rec = setup()
    give(kube, notices, [victim(3)])
    r = notices.review(snapshot(kube), T + timedelta(seconds=119))
    assert [p.facts.pod for p in r.pending] == ["ns/a-worker-3"] and r.pending[0].seconds_left == 1
    assert notices.act(r).evicted == []
    assert not kube.verbs("evict", dry_run=False)
    r = notices.review(snapshot(kube), T + timedelta(seconds=120))
    result = notices.act(r)
    assert result.evicted == [("ns/a-worker-3", "uid-ns-a-worker-3", "ns/g")]
    assert [c[3] for c in kube.verbs("evict", dry_run=False)] == ["a-worker-3"]
    assert kube.get(PODS, "a-worker-3", "ns")["metadata"].get("deletionTimestamp")
    assert notices.given == {}
    assert events(rec)[-2:] == [("Pod", "a-worker-3", "EvictedForGang"), ("PyTorchJob", "a", "ScaledDown")]
    assert "notice ended at 2026-01-01T13:02:00Z" in rec.emitted[-2]["message"]
    # the terminating pod is no longer reviewed
    assert notices.review(snapshot(kube), T + timedelta(seconds=121)).due == ()


def test_a_checkpoint_after_the_notice_evicts_at_once() -> None:
    kube, notices, _rec = setup()
    give(kube, notices, [victim(3)])
    # the training code (rank 0 in worker-0) records a checkpoint 40 s into the notice
    kube.patch(PODS, "a-worker-0", {"metadata": {"annotations": {
        keys.LAST_CHECKPOINT_TIME: b.ts(T + timedelta(seconds=40))}}}, "ns")
    r = notices.review(snapshot(kube), T + timedelta(seconds=41))
    (due,) = r.due
    assert "checkpointed at 2026-01-01T13:00:40Z, after the notice began at 2026-01-01T13:00:00Z" in due.why
    assert notices.act(r).evicted == [("ns/a-worker-3", "uid-ns-a-worker-3", "ns/g")]


def test_an_old_checkpoint_does_not_shorten_the_notice() -> None:
    kube, notices, _ = setup()
    kube.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": {
        keys.LAST_CHECKPOINT_TIME: b.ts(T - timedelta(seconds=2))}}}, "ns")  # 1 s before would count (rounding)
    give(kube, notices, [victim(3)])
    r = notices.review(snapshot(kube), T + timedelta(seconds=60))
    assert r.due == () and len(r.pending) == 1


def test_withdrawn_when_the_gang_is_placed_or_gone() -> None:
    kube, notices, rec = setup()
    give(kube, notices, [victim(3)])
    for i in (0, 1):  # the gang found room elsewhere
        kube.patch(PODS, f"g-{i}", {"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}, "ns")
    r = notices.review(snapshot(kube), T + timedelta(seconds=10))
    result = notices.act(r)
    assert result.withdrawn == ["ns/a-worker-3"] and result.evicted == []
    ann = annotations(kube, "a-worker-3")
    assert keys.EVICT_AFTER not in ann and keys.EVICTED_FOR not in ann
    assert notices.given == {}
    assert events(rec)[-2:] == [("Pod", "a-worker-3", "EvictionNoticeWithdrawn"),
                                ("PyTorchJob", "a", "EvictionNoticeWithdrawn")]
    assert "gang ns/g is placed" in rec.emitted[-1]["message"]
    assert not kube.verbs("evict", dry_run=False)
    assert notices.review(snapshot(kube), T + timedelta(seconds=500)) == notices.review(snapshot(kube))

    kube, notices, rec = setup()
    give(kube, notices, [victim(2)])
    kube.delete(PODGROUPS, "g", "ns")
    assert notices.act(notices.review(snapshot(kube), T + timedelta(seconds=500))).withdrawn == ["ns/a-worker-2"]
    assert "gang ns/g is gone" in rec.emitted[-1]["message"]


def test_a_due_eviction_a_pdb_refuses_is_retried_next_cycle() -> None:
    kube, notices, _ = setup()
    give(kube, notices, [victim(3)])
    kube.pdb_blocked.add("ns/a-worker-3")
    r = notices.review(snapshot(kube), T + timedelta(seconds=200))
    result = notices.act(r)
    assert result.evicted == [] and "not evicted" in result.failed["ns/a-worker-3"]
    assert annotations(kube, "a-worker-3")[keys.EVICT_AFTER]  # the notice stays
    kube.pdb_blocked.clear()
    assert notices.act(notices.review(snapshot(kube), T + timedelta(seconds=205))).evicted[0][0] == "ns/a-worker-3"


def test_a_failed_withdrawal_is_retried_and_a_gone_pod_is_forgotten() -> None:
    kube, notices, _ = setup()
    give(kube, notices, [victim(3)])
    kube.delete(PODGROUPS, "g", "ns")
    kube.faults.append(raise_on("patch-merge", "pods", "a-worker-3", error=KubeError("etcd slow", 500)))
    result = notices.act(notices.review(snapshot(kube)))
    assert "not withdrawn" in result.failed["ns/a-worker-3"] and notices.given
    assert notices.act(notices.review(snapshot(kube))).withdrawn == ["ns/a-worker-3"]
    give(kube, notices, [victim(2)], gang="ns/g2")
    kube.objects.pop((PODS.plural, "ns", "a-worker-2"))  # deleted by someone else
    notices.review(snapshot(kube))
    assert "uid-ns-a-worker-2" not in notices.given


def test_the_job_cannot_push_its_notice_back_while_the_agent_runs() -> None:
    kube, notices, _ = setup()
    give(kube, notices, [victim(3)])
    kube.patch(PODS, "a-worker-3", {"metadata": {"annotations": {
        keys.EVICT_AFTER: b.ts(T + timedelta(days=1))}}}, "ns")  # the job's own pod-patch right
    r = notices.review(snapshot(kube), T + timedelta(seconds=120))
    assert [d.facts.pod for d in r.due] == ["ns/a-worker-3"]


def test_the_deadline_is_the_victims_queues_notice() -> None:
    kube, notices, _ = setup()
    other = Eviction(pod="ns/a-worker-2", node="n0", job="ns/a", queue="default", for_gang="ns/g", reason="",
                     uid="uid-ns-a-worker-2")
    give(kube, notices, [victim(3), other], now=T)
    assert annotations(kube, "a-worker-3")[keys.EVICT_AFTER] == b.ts(T + timedelta(seconds=120))
    assert annotations(kube, "a-worker-2")[keys.EVICT_AFTER] == b.ts(T)  # noticeSeconds 0: due at once


def test_the_events_are_documented() -> None:
    root = Path(__file__).resolve().parents[2]
    source = (root / "elastic_controller" / "notice.py").read_text()
    reasons = set(re.findall(r'"(?:Normal|Warning)", "(\w+)"', source))
    assert reasons == {"EvictionNotice", "EvictionNoticeWithdrawn", "EvictedForGang", "ScaledDown",
                       "LeavingInPlace", "ScalingDownInPlace"}
    source = (root / "elastic_controller" / "execute" / "inplace.py").read_text()
    reasons |= set(re.findall(r'"(?:Normal|Warning)", "(\w+)"', source))
    assert "ResizingInPlace" in reasons
    doc = (root / "docs" / "operations.md").read_text()
    assert [r for r in sorted(reasons) if f"| `{r}` |" not in doc] == []


@pytest.mark.parametrize("now", [T, T + timedelta(microseconds=250_000)])
def test_notice_never_ends_before_its_full_length(now: datetime) -> None:
    kube, notices, _ = setup()
    result = give(kube, notices, [victim(3)], now=now)
    written = b.ts(result.evict_after["ns/a-worker-3"])
    assert annotations(kube, "a-worker-3")[keys.EVICT_AFTER] == written
    from elastic_controller.policy.times import parse_time

    parsed = parse_time(written)
    assert parsed is not None and parsed >= now + timedelta(seconds=120)


def test_the_due_victim_gets_its_event_even_when_the_informer_already_dropped_it() -> None:
    """The EvictedForGang Event names the pod by the uid under notice, not by a cache lookup after
    the eviction (the informer may already have seen the pod go)."""
    kube, _, _ = setup()

    class Racing(FakeStore):
        def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, object] | None:
            obj = super().get(res, name, namespace)
            return None if res is PODS and obj is not None and obj["metadata"].get("deletionTimestamp") else obj

    rec = EventRecorder(kube)
    notices = Notices(kube, Racing(kube), CFG, rec, clock=lambda: T)
    give(kube, notices, [victim(3)])
    notices.act(notices.review(snapshot(kube), T + timedelta(seconds=120)))
    ours = [e["involvedObject"] for e in rec.emitted if e["reason"] == "EvictedForGang"]
    assert [(o["name"], o["uid"]) for o in ours] == [("a-worker-3", "uid-ns-a-worker-3")]
