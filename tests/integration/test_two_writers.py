"""Two active agents against a real kube-apiserver (issue 36, F3): the loser's "interrupted plan
dropped" leaves the winner's stamp and claims alone; the winner's plan finishes and its cooldown is
the one the job keeps. Each agent has its own caches and identity (as two releases, or leader
election off, would have)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import NotFoundError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.resources import PODGROUPS, PODS
from elastic_controller.policy import keys
from elastic_controller.policy.contract import ScaleRecord
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.agentbox import FAST, ts
from tests.harness.legacy import legacy_policy
from tests.harness.tenantbox import cleanup, starving_world

pytestmark = pytest.mark.integration
SLOW = ElasticConfig(defaults=legacy_policy(starvationSeconds=3600, minRuntimeSeconds=0, cooldownSeconds=300))


@pytest.fixture
def kc(kubeconfig: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


def agent(kc: KubeClient, identity: str, cfg: ElasticConfig, caches: list[Caches]) -> Agent:
    c = Caches(kc)
    c.start()
    caches.append(c)
    assert c.wait_synced(30), c.unsynced()
    return Agent(kc, c, cfg, EventRecorder(kc), identity=identity)


def stamp(kc: KubeClient, ns: str) -> dict[str, str]:
    ann = kc.get(PODGROUPS, "a", ns)["metadata"].get("annotations") or {}
    return {k: ann[k] for k in (keys.LAST_SCALE_TIME, keys.LAST_SCALE_DIRECTION, keys.SCALE_RECORD) if k in ann}


def claimed(kc: KubeClient, ns: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kc.list(PODS, ns)[0]
                  if (p["metadata"].get("annotations") or {}).get(keys.EVICTED_FOR) == f"{ns}/b")


def settled(a: Agent, ns: str, want: dict[str, str]) -> None:
    """Wait until ``a``'s cache shows a's PodGroup annotated as ``want`` and gang b's last pod."""
    store: Any = a.store
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pg = store.get(PODGROUPS, "a", ns)
        ann = (pg or {}).get("metadata", {}).get("annotations") or {}
        if pg is not None and all(ann.get(k) == v for k, v in want.items()) and \
                store.get(PODS, "b-3", ns) is not None and not store.stale():
            return
        time.sleep(0.2)
    raise AssertionError(f"cache never showed {want}")


class SecondWriterFirst:
    """The agent's API client, except that just before its first merge patch of a's PodGroup,
    another client's write lands on that PodGroup (``write``): the server, not the agent's cache,
    holds the newer state when the agent's stamp arrives."""

    def __init__(self, kc: KubeClient, ns: str, write: dict[str, Any]) -> None:
        self.kc, self.ns, self.write, self.landed = kc, ns, write, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kc, name)

    def patch(self, res: Any, name: str, patch: Any, namespace: str | None = None, **kw: Any) -> Any:
        if not self.landed and res is PODGROUPS and name == "a" and namespace == self.ns and \
                kw.get("patch_type", "merge") == "merge" and not kw.get("dry_run"):
            self.landed = True
            self.kc.patch(PODGROUPS, "a", self.write, self.ns)
        return self.kc.patch(res, name, patch, namespace, **kw)


def test_a_stamp_written_between_read_and_write_is_never_overwritten(kc: KubeClient, namespace: str) -> None:
    # Issue 36, F3's gap: the stamp is a compare-and-swap on the real server's resourceVersion. The
    # second writer's stamp lands after our agent read a's PodGroup; ours is refused (409), the plan
    # is not carried out, and its undo leaves the second writer's stamp as it was (before: a plain
    # patch replaced it, and the plan's undo put back the stamp it had read).
    ns = namespace
    node = starving_world(kc, ns)
    caches: list[Caches] = []
    try:
        at = ts(datetime.now(UTC))
        theirs = {keys.LAST_SCALE_TIME: at, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value,
                  keys.SCALE_RECORD: ScaleRecord("0123456789abcdef", "second-writer", at, "evict", f"{ns}/b",
                                                 {f"{ns}/a-worker-5": ""}, {}).encode()}
        first = agent(kc, "first", FAST, caches)
        settled(first, ns, {})
        proxy = SecondWriterFirst(kc, ns, {"metadata": {"annotations": theirs}})
        first.executor.api = proxy
        report = first.run_cycle()
        assert proxy.landed
        assert stamp(kc, ns) == theirs, report  # not overwritten, not undone
        assert report.evicted == [] and report.failed.get(f"{ns}/b", "").startswith("conflict"), report
        assert claimed(kc, ns) == []  # its own claims taken back
        assert all(not p["metadata"].get("deletionTimestamp") for p in kc.list(PODS, ns)[0])
    finally:
        cleanup(kc, node, [ns], caches)


def test_the_losers_drop_leaves_the_winners_stamp(kc: KubeClient, namespace: str) -> None:
    ns = namespace
    node = starving_world(kc, ns)
    caches: list[Caches] = []
    try:
        # The winner stamps its plan (claims on a-worker-4/5, a's PodGroup) and stops before evicting.
        winner = agent(kc, "winner", FAST, caches)
        settled(winner, ns, {})
        winner.faults = {"jobs-stamped": "raise"}
        with pytest.raises(BaseException, match="jobs-stamped"):
            winner.run_cycle()
        ours = stamp(kc, ns)
        rec = ScaleRecord.decode(ours.get(keys.SCALE_RECORD))
        assert rec is not None and rec.by == "winner", ours
        assert claimed(kc, ns) == ["a-worker-4", "a-worker-5"]

        # The loser (its own caches; b has not starved in its view) finds the claims, refuses to
        # finish the plan, and must not drop it: the winner's stamp and claims stay.
        loser = agent(kc, "loser", SLOW, caches)
        settled(loser, ns, ours)
        report = loser.run_cycle()
        assert report.resumed == [] and report.evicted == [], report
        assert stamp(kc, ns) == ours  # before the fence: taken back (direction and record removed)
        assert claimed(kc, ns) == ["a-worker-4", "a-worker-5"]

        # The winner goes on: its plan finishes, its cooldown is the job's.
        winner.faults = {}
        done = winner.run_cycle()
        assert sorted(done.resumed) == [f"{ns}/a-worker-4", f"{ns}/a-worker-5"], done
        assert stamp(kc, ns) == ours
        for name in ("a-worker-4", "a-worker-5"):
            try:
                assert kc.get(PODS, name, ns)["metadata"].get("deletionTimestamp"), name
            except NotFoundError:
                pass
    finally:
        cleanup(kc, node, [ns], caches)
