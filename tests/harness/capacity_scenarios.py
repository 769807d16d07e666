"""Stories for the e2e tests with Volcano's ``capacity`` plugin (test_capacity_flat.py,
test_capacity_hierarchy.py): the box runs hack/volcano-scheduler-capacity[-hierarchy].conf, our
agent runs with ``shares: {plugin: capacity[, hierarchy: true]}``. 4 kwok nodes x 8 GPUs; every
worker asks 4 GPUs, 1 cpu, 1Gi. In hierarchy mode the queues of a story are children of a
department queue of their own (itself a child of ``root``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError, NotFoundError
from elastic_controller.kube.resources import EVENTS, PODS, PYTORCHJOBS, QUEUES
from tests.harness.legacy import LEGACY_FLOW
from tests.harness.stack import WEBHOOKS, pytorchjob, start_stack, wait_until

GPU = "nvidia.com/gpu"
COOLDOWN = 30


def config_text(hierarchy: bool) -> str:
    return ("agent: {intervalSeconds: 1}\n"
            f"defaults: {{cooldownSeconds: {COOLDOWN}, minRuntimeSeconds: 2, starvationSeconds: 3,"
            f" maxScaleUpPerCycle: 8, {LEGACY_FLOW}}}\n"
            f"shares: {{plugin: capacity, hierarchy: {'true' if hierarchy else 'false'}}}\n")


class Story:
    """Queues, jobs and observation for one test in ``ns``; ``close`` deletes the queues (a
    guarantee left behind would lower every later queue's real capability)."""

    def __init__(self, kc: KubeClient, ns: str, hierarchy: bool) -> None:
        self.kc = kc
        self.ns = ns
        self.hierarchy = hierarchy
        self.tag = uuid.uuid4().hex[:5]
        self.queues: list[str] = []
        self.dept = ""
        self.hook = ""
        self._stop = threading.Event()
        self.low: dict[str, int] = {}  # job -> fewest workers seen running since watch() started
        self.deleted: dict[str, list[str]] = {}  # job -> its pods that went away

    # -- setup
    def start(self, box: Any, box_process: Any, kubeconfig: str, cert: tuple[Path, Path], tmp: Path) -> None:
        cfg = tmp / "config.yaml"
        cfg.write_text(config_text(self.hierarchy))
        self.hook = start_stack(self.kc, box, box_process, kubeconfig, cfg, cert, self.ns)
        if self.hierarchy:
            self.dept = self.queue("dept")

    def queue(self, name: str, parent: str | None = None, **spec: Any) -> str:
        full = f"{name}-{self.tag}"
        body: dict[str, Any] = {"weight": 1, "reclaimable": True}
        for key in ("deserved", "capability"):
            if key in spec:
                body[key] = spec[key]
        if "guarantee" in spec:
            body["guarantee"] = {"resource": spec["guarantee"]}
        if self.hierarchy and name != "dept":
            body["parent"] = parent or self.dept
        self.kc.create(QUEUES, {"metadata": {"name": full}, "spec": body})
        self.queues.append(full)
        wait_until(f"queue {full} Open", lambda: (self.kc.get(QUEUES, full).get("status") or {}).get("state") == "Open",
                   60)
        return full

    def close(self) -> None:
        self._stop.set()
        for job in self._jobs():
            try:
                self.kc.delete(PYTORCHJOBS, job, self.ns)
            except KubeError:
                pass
        wait_until("the story's pods gone", lambda: not self.kc.list(PODS, self.ns)[0], 120)
        for q in reversed(self.queues):
            try:
                self.kc.delete(QUEUES, q)
            except KubeError:
                pass
        if self.hook:
            try:
                self.kc.delete(WEBHOOKS, self.hook)
            except KubeError:
                pass

    def _jobs(self) -> list[str]:
        return [j["metadata"]["name"] for j in self.kc.list(PYTORCHJOBS, self.ns)[0]]

    # -- jobs
    def elastic(self, name: str, queue: str, lo: int, hi: int) -> None:
        self.kc.create(PYTORCHJOBS, pytorchjob(name, queue, hi, (lo, hi)), self.ns)

    def running_elastic(self, name: str, queue: str, lo: int, hi: int, running: int | None = None) -> None:
        """An elastic job of ``lo``..``hi`` workers, once ``running`` (default ``hi``) of them run."""
        self.elastic(name, queue, lo, hi)
        self.wait_running(name, hi if running is None else running)

    def gang(self, name: str, queue: str, workers: int) -> None:
        self.kc.create(PYTORCHJOBS, pytorchjob(name, queue, workers, None), self.ns)

    def pods(self, job: str) -> list[dict[str, Any]]:
        return self.kc.list(PODS, self.ns, label_selector=f"training.kubeflow.org/job-name={job}")[0]

    def running(self, job: str) -> list[dict[str, Any]]:
        return [p for p in self.pods(job) if (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]

    def gated(self, job: str) -> list[dict[str, Any]]:
        return [p for p in self.pods(job) if (p.get("spec") or {}).get("schedulingGates")]

    def wait_running(self, job: str, n: int, timeout: float = 180) -> None:
        wait_until(f"{job} runs {n} workers", lambda: len(self.running(job)) >= n, timeout)

    def watch(self, *jobs: str) -> None:
        """Sample ``jobs`` from now on: fewest running workers, pods that went away."""
        seen = {job: {p["metadata"]["uid"]: p["metadata"]["name"] for p in self.pods(job)} for job in jobs}
        for job in jobs:
            self.low[job] = len(self.running(job))
            self.deleted[job] = []

        def sample() -> None:
            while not self._stop.wait(0.3):
                for job in jobs:
                    try:
                        pods = self.pods(job)
                    except KubeError:
                        continue
                    now = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods
                           if not p["metadata"].get("deletionTimestamp")}
                    self.deleted[job] += [n for u, n in seen[job].items() if u not in now]
                    seen[job] = now
                    self.low[job] = min(self.low[job], len(self.running(job)))

        threading.Thread(target=sample, daemon=True).start()

    def evictions(self) -> list[str]:
        """Pods named in our EvictedForGang Events in the namespace."""
        return sorted(e["involvedObject"]["name"] for e in self.kc.list(EVENTS, self.ns)[0]
                      if e.get("reason") == "EvictedForGang")


def index(pod_name: str) -> int:
    return int(pod_name.rsplit("-", 1)[1])


# -- the stories -----------------------------------------------------------------------------------


def reclaim_from_best_effort_sibling(st: Story) -> None:
    """team (deserved 16 GPUs) starts a 2 x 4 GPU gang on a cluster that a best-effort sibling's
    elastic job fills: two of the sibling's elastic workers are evicted, the gang runs."""
    team = st.queue("team", deserved={GPU: 16})
    scratch = st.queue("scratch")
    st.running_elastic("s", scratch, 2, 8)
    st.watch("s")
    st.gang("b", team, 2)
    st.wait_running("b", 2, COOLDOWN + 120)
    victims = wait_until("2 EvictedForGang events", lambda: len(ev := st.evictions()) >= 2 and ev, 30)
    assert len(victims) == 2 and all(v.startswith("s-worker-") and index(v) >= 2 for v in victims), victims
    assert st.low["s"] >= 6


def guarantee_is_kept(st: Story) -> None:
    """held (guarantee 8 GPUs) and a best-effort scratch each run 4 x 4 GPUs; team's 5 x 4 GPU gang
    needs 5 victims: scratch's 3 elastic workers and held's 2 above its guarantee, never a third."""
    held = st.queue("held", guarantee={GPU: 8})
    scratch = st.queue("scratch")
    team = st.queue("team", deserved={GPU: 24})
    st.running_elastic("h", held, 1, 4)
    st.running_elastic("s", scratch, 1, 4)
    st.watch("h", "s")
    st.gang("b", team, 5)
    st.wait_running("b", 5, COOLDOWN + 120)
    victims = wait_until("5 EvictedForGang events", lambda: len(ev := st.evictions()) >= 5 and ev, 30)
    assert sorted(v.split("-")[0] for v in victims) == ["h", "h", "s", "s", "s"], victims
    assert st.low["h"] >= 2, "held went below its guarantee"
    assert len(st.running("h")) == 2 and len(st.running("s")) == 1


def idle_beyond_deserved_no_evictions(st: Story) -> None:
    """team (deserved 8 GPUs) already holds 8 with an elastic job; its next 2 x 4 GPU gang fits on
    idle GPUs: Volcano's capacity plugin places it beyond deserved, and nothing is evicted (not even
    team's own elastic worker, which the proportion rules would take to bring team under its share)."""
    team = st.queue("team", deserved={GPU: 8})
    scratch = st.queue("scratch")
    st.running_elastic("t", team, 1, 2)
    st.running_elastic("s", scratch, 1, 4)
    st.watch("t", "s")
    st.gang("g", team, 2)
    st.wait_running("g", 2, 60)
    st._stop.wait(8)  # several agent cycles past starvationSeconds
    assert st.evictions() == []
    assert st.deleted["t"] == [] and st.deleted["s"] == []
    assert len(st.running("t")) == 2 and len(st.running("s")) == 4


def department_capability(st: Story) -> None:
    """Hierarchy only: the department may hold 24 GPUs. Its best-effort scratch queue grows to 24
    (the agent lifts no gate beyond: Volcano would not place the pod), then team's 2 x 4 GPU gang
    finds 8 idle GPUs but no room in the department: two of scratch's workers are evicted (a sibling
    in the department makes the room), and the gang runs."""
    dept = st.queue("capped", parent="root", capability={GPU: 24})
    team = st.queue("team", parent=dept, deserved={GPU: 8})
    scratch = st.queue("scratch", parent=dept)
    st.running_elastic("s", scratch, 1, 8, 6)
    st._stop.wait(5)
    assert len(st.running("s")) == 6 and len(st.gated("s")) == 2, "a gate was lifted beyond the department's room"
    st.watch("s")
    st.gang("b", team, 2)
    st.wait_running("b", 2, COOLDOWN + 120)
    victims = wait_until("2 EvictedForGang events", lambda: len(ev := st.evictions()) >= 2 and ev, 30)
    assert all(v.startswith("s-worker-") for v in victims) and len(victims) == 2, victims
    assert st.low["s"] >= 4


def run_story(story: Callable[[Story], None], kc: KubeClient, hierarchy: bool, box: Any, box_process: Any,
              kubeconfig: str, ns: str, cert: tuple[Path, Path], tmp: Path) -> None:
    st = Story(kc, ns, hierarchy)
    try:
        st.start(box, box_process, kubeconfig, cert, tmp)
        story(st)
    finally:
        st.close()


def gone(kc: KubeClient, res: Any, name: str, ns: str | None = None) -> bool:
    try:
        kc.get(res, name, ns)
        return False
    except NotFoundError:
        return True
