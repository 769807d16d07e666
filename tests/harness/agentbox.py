"""The controller/agent integration tests' world: our own client on the
box, objects from tests/harness/builders.py created for real, pods made Running without a kubelet."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from elastic_controller.agent import Agent
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import NotFoundError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.resources import NODES, PODGROUPS, PODS, PYTORCHJOBS, Resource
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.legacy import legacy_policy
from tests.harness.waiting import wait_until as _wait_until

KINDS = {"Pod": PODS, "PodGroup": PODGROUPS, "PyTorchJob": PYTORCHJOBS}
# (the three keys of issue 38 as before: the scenarios evict at once and shrink small jobs)
FAST = ElasticConfig(defaults=legacy_policy(starvationSeconds=0, minRuntimeSeconds=0, cooldownSeconds=300))


def wait_until(what: str, fn: Callable[[], Any], timeout: float = 30, interval: float = 0.2) -> Any:
    return _wait_until(what, fn, timeout, interval)


def ts(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clean(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    for k in ("uid", "creationTimestamp", "deletionTimestamp", "resourceVersion"):
        meta.pop(k, None)
    meta["namespace"] = ns
    obj.pop("status", None)
    return obj


class Cluster:
    """Create builder objects on the box; remember nodes to remove them afterwards."""

    def __init__(self, kc: KubeClient, ns: str) -> None:
        self.kc = kc
        self.ns = ns
        self.nodes: list[str] = []

    def node(self, gpus: int = 8) -> str:
        name = f"n-{uuid.uuid4().hex[:6]}"
        obj = b.node(name, gpus=gpus, cpu="32", memory="256Gi")
        status = obj.pop("status")
        obj["metadata"]["annotations"] = {}
        self.kc.create(NODES, obj)
        self.kc.patch(NODES, name, {"status": status}, subresource="status")
        self.nodes.append(name)
        return name

    def add(self, *groups: Any) -> None:
        for obj in b.items(*groups):
            kind = obj["kind"]
            if kind not in KINDS:
                continue
            status = obj.get("status") or {}
            out = self.kc.create(KINDS[kind], clean(obj, self.ns), self.ns)
            if kind == "Pod" and status.get("phase") == "Running":
                self.kc.patch(PODS, out["metadata"]["name"], {"status": status}, self.ns, subresource="status")

    def pod(self, name: str) -> dict[str, Any]:
        return self.kc.get(PODS, name, self.ns)

    def pg(self, name: str) -> dict[str, Any]:
        return self.kc.get(PODGROUPS, name, self.ns)

    def events(self) -> list[dict[str, Any]]:
        from elastic_controller.kube.resources import EVENTS
        return self.kc.list(EVENTS, self.ns)[0]

    def cleanup(self) -> None:
        for p in self.kc.list(PODS, self.ns)[0]:
            try:
                self.kc.patch(PODS, p["metadata"]["name"], {"metadata": {"finalizers": None}}, self.ns)
                self.kc._send("DELETE", PODS.path(self.ns, p["metadata"]["name"]),
                              body={"gracePeriodSeconds": 0})
            except NotFoundError:
                pass
        for n in self.nodes:
            try:
                self.kc.delete(NODES, n)
            except NotFoundError:
                pass


def elastic_job(ns: str, name: str, node: str, *, min_r: int, max_r: int, running: int | None = None,
                **kw: Any) -> list[dict[str, Any]]:
    """builders.elastic_job, every pod pinned to ``node`` (the box is shared by tests)."""
    objs = b.elastic_job(ns, name, min_r=min_r, max_r=max_r, nodes=[node], running=running,
                         scheduled_at=datetime.now(UTC) - timedelta(hours=1), **kw)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
            cond = (o.get("status") or {}).get("conditions") or []
            for c in cond:
                c["lastTransitionTime"] = ts(datetime.now(UTC) - timedelta(hours=1))
    return objs


def gang(ns: str, name: str, node: str, members: int, gpus: int = 1) -> list[dict[str, Any]]:
    objs = b.gang(ns, name, members=members, gpus=gpus)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
            o["status"] = {"phase": "Pending"}
    return objs


class AgentHarness:
    def __init__(self, kc: Any, cfg: ElasticConfig = FAST) -> None:
        self.caches = Caches(kc if isinstance(kc, KubeClient) else kc.inner)
        self.caches.start()
        assert self.caches.wait_synced(30), self.caches.unsynced()
        self.agent = Agent(kc, self.caches, cfg, EventRecorder(kc))

    def settle(self, res: Resource, ns: str, name: str, pred: Callable[[dict[str, Any]], bool]) -> None:
        """Wait until the cache shows ``name`` as ``pred`` wants and no cache is stale: a watch that
        failed under load (the agent then rightly refuses to act until it is relisted) must not make
        the test's single cycle a no-op."""
        wait_until(f"cache sees {res.plural} {ns}/{name}, no cache stale",
                   lambda: (o := self.caches.get(res, name, ns)) is not None and pred(o)
                   and not self.caches.stale(), timeout=15)

    def stop(self) -> None:
        self.caches.stop()


@pytest.fixture(scope="session")
def kc(kubeconfig: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


@pytest.fixture
def cluster(kc: KubeClient, namespace: str) -> Iterator[Cluster]:
    c = Cluster(kc, namespace)
    yield c
    c.cleanup()


@pytest.fixture
def harness(kc: KubeClient) -> Iterator[Callable[..., AgentHarness]]:
    made: list[AgentHarness] = []

    def make(client: Any = None, cfg: ElasticConfig = FAST) -> AgentHarness:
        h = AgentHarness(client or kc, cfg)
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


EVICTED_FOR = "volcano-elastic.io/evicted-for"
LAST = "volcano-elastic.io/last-scale-time"


def scenario(c: Cluster) -> str:
    """Job A (2..6 workers, all running) fills an 8-GPU node; gang B (4 x 1 GPU) waits for it."""
    n = c.node(gpus=8)
    c.add(elastic_job(c.ns, "a", n, min_r=2, max_r=6), gang(c.ns, "b", n, members=4))
    return n


def terminating(c: Cluster) -> list[str]:
    return sorted(p["metadata"]["name"] for p in c.kc.list(PODS, c.ns)[0] if p["metadata"].get("deletionTimestamp"))


NOTICE = dataclasses.replace(FAST, defaults=dataclasses.replace(FAST.defaults, noticeSeconds=10))


def agent_of(h: Any, kc: Any, cfg: ElasticConfig, identity: str, **kw: Any) -> Agent:
    h.agent = Agent(kc, h.caches, cfg, EventRecorder(kc), identity=identity, **kw)
    return h.agent


def noticing(cluster: Cluster, harness: Any, kc: Any, identity: str = "only") -> tuple[Any, Agent]:
    """``scenario`` with an agent of the NOTICE config (``identity``) once gang B is seen: its first
    cycle gave A's two extra workers notice. Returns the harness and the agent."""
    scenario(cluster)
    h = harness(cfg=NOTICE)
    agent = agent_of(h, kc, NOTICE, identity)
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    assert agent.run_cycle().noticed
    return h, agent
