"""What counts as a PodDisruptionBudget's refusal (issue 36, T13; review S3/S4): only the Eviction
API's 429 for a PDB (its DisruptionBudget cause or message), never the API server's throttling 429;
a refusal belongs to the pod it refused (its uid), not to a pod recreated under the same name; a pod
removed past its PDB is counted once in the eviction metric."""

from __future__ import annotations

import json
from typing import Any

from elastic_controller.agent import Agent
from elastic_controller.kube.errors import TooManyRequestsError, UnavailableError, error_for
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import PODS
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import Clock, fake_kube

PDB_BODY = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": {"causes": [{"reason": "DisruptionBudget",
                                    "message": "The disruption budget a-pdb needs 6 healthy pods and has 6"}]}}
THROTTLE_BODY = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429, "reason": "TooManyRequests",
                 "message": "Too many requests, please try again later.", "details": {"retryAfterSeconds": 1}}


def test_only_a_pdbs_429_is_a_refusal() -> None:
    pdb = error_for(429, json.dumps(PDB_BODY), "evict team-a/a-worker-5")
    assert isinstance(pdb, TooManyRequestsError)
    cause_only = {**PDB_BODY, "message": "eviction refused"}  # the cause alone says so
    assert isinstance(error_for(429, json.dumps(cause_only), "evict"), TooManyRequestsError)
    throttled = error_for(429, json.dumps(THROTTLE_BODY), "evict team-a/a-worker-5")
    assert not isinstance(throttled, TooManyRequestsError)  # old code: a PDB refusal
    assert isinstance(throttled, UnavailableError) and throttled.status == 429
    assert not isinstance(error_for(429, "", "evict"), TooManyRequestsError)


def world() -> list[Any]:
    return b.items(b.node("n1", gpus=6), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=2, gpus=1))


class Counted:
    """The agent's metrics, the evictions counted by (queue, reason)."""

    def __init__(self) -> None:
        self.evictions: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def eviction(self, queue: str, reason: str) -> None:
        self.evictions.append((queue, reason))


def agent(kube: FakeKube, clock: Clock, metrics: Any = None) -> Agent:
    return Agent(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube), clock=clock, metrics=metrics)


def test_a_throttled_eviction_is_no_pdb_refusal() -> None:
    kube, clock = fake_kube(world()), Clock()
    kube.faults.append(raise_on("evict", "pods", error=error_for(429, json.dumps(THROTTLE_BODY), "evict")))
    ag = agent(kube, clock)
    report = ag.run_cycle()
    assert report.evicted == [] and "pdb" not in report.failed["team-b/b"], report.failed
    assert ag.pdb_refused == {}  # old code: both victims "refused by a PDB", then deleted past it


def test_a_refusal_belongs_to_the_pod_it_refused_not_its_name() -> None:
    kube, clock = fake_kube(world()), Clock()
    kube.pdb_blocked = {"team-a/a-worker-5"}
    ag = agent(kube, clock)
    ag.run_cycle()
    assert "team-a/a-worker-5" in ag._pdb_refused(clock())
    # the training operator recreates the pod under the same name (a new uid): not refused yet, the
    # Eviction API is tried first (a DELETE of it would pass a PDB that never refused it)
    kube.objects[(PODS.plural, "team-a", "a-worker-5")]["metadata"]["uid"] = "uid-recreated"
    assert "team-a/a-worker-5" not in ag._pdb_refused(clock())


def test_a_pod_past_its_pdb_is_counted_once() -> None:
    kube, clock = fake_kube(world()), Clock()
    kube.pdb_blocked = {f"team-a/a-worker-{i}" for i in range(6)}
    metrics = Counted()
    ag = agent(kube, clock, metrics)
    for _ in range(4):
        ag.run_cycle()
        clock.later(5)
    deleted = sorted(f"{c[2]}/{c[3]}" for c in kube.calls if c[0] == "delete" and c[1] == "pods" and not c[4])
    assert len(deleted) == 2, kube.calls
    assert metrics.evictions == [("default", "pdb-passed")] * 2  # old code: also ("default", "starving-gang")
