"""Issue 38 on the whole box (real Volcano scheduler, kwok GPU nodes 4 x 8, the training operator, our
webhook, controller and agent): the agent orders growth by attained service and makes the fairness
scale-down, as the simulator does, and says why in ``plan``, ``status`` and Events.

Every worker takes 4 GPUs: the box holds 8. Time makes the attained service (no stamp is written by
the test): ``rich`` runs several workers from early on, ``poor`` starts later with fewer.

To read ``plan`` and ``status`` *before* the agent acts, the test stops our controller (its agent
with it), changes the cluster (a rigid job finishes: room), runs the read-only commands against the
box (``plan`` on a ``kubectl get -o json`` dump, ``status`` on the API server), then starts a new
controller, whose agent does what they said. The restart also shows the decision needs nothing the
old agent held in memory (the attained service is read from the PodGroups and pods)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError, NotFoundError
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, PYTORCHJOBS, QUEUES
from elastic_controller.policy import keys
from elastic_controller.policy.attained import parse_stamp
from elastic_controller.policy.contract import Decision, sentence_of
from elastic_controller.policy.times import parse_time
from hack.localbox import ours
from hack.localbox.procs import free_port
from tests.harness import stack
from tests.harness.legacy import LEGACY
from tests.harness.stack import WEBHOOKS, pytorchjob, register_webhook, wait_until

kc = stack.kc  # a fixture
pytestmark = pytest.mark.e2e

def _decisions_of(client: KubeClient, ns: str, job: str, seen: list[Decision], seconds: int = 120) -> threading.Thread:
    """A thread that watches the PodGroups of ``ns`` from now on and appends every ``last-decision`` of
    ``job`` it sees to ``seen`` (one written and replaced a cycle later, e.g. a scale-down's by the
    hold that follows, is seen too), until the first of kind down."""
    _, rv = client.list(PODGROUPS, ns)

    def watch() -> None:
        for event in client.watch(PODGROUPS, rv, ns, timeout_seconds=seconds):
            meta = (event.get("object") or {}).get("metadata") or {}
            said = Decision.decode((meta.get("annotations") or {}).get(keys.LAST_DECISION))
            if meta.get("name") != job or said is None or (seen and seen[-1] == said):
                continue
            seen.append(said)
            if said.kind == "down":
                return

    thread = threading.Thread(target=watch, name=f"watch {ns}/{job}", daemon=True)
    thread.start()
    return thread


COOLDOWN = 5  # seconds: short, so the test waits little for a job to be free to move again


def _config(**defaults: Any) -> str:
    """The stack's config: a 1 s agent, short time constants, and ``defaults`` on top. No gang starves
    in these stories (starvationSeconds 600: a waiting gang only holds growth back); no first
    rendezvous (every growth is ordered by the queue's order); any growth is worth it unless said."""
    base: dict[str, Any] = {"cooldownSeconds": COOLDOWN, "minRuntimeSeconds": 2, "starvationSeconds": 600,
                            "firstRendezvousSeconds": 0, "minScaleUpGain": 0, "maxScaleUpPerCycle": 8,
                            "minWorkersToShrink": 2, "scaleUpAfterCheckpointSeconds": None,
                            "orderBy": "attainedService", **LEGACY}
    base.update(defaults)
    return ("agent: {intervalSeconds: 1}\ngating: {enabled: true}\n"
            f"defaults: {json.dumps(base)}\n")  # JSON is YAML


@dataclass
class Box:
    """Our stack on the box for one test, in ``ns``, with one queue of its own."""

    kc: KubeClient
    box: Any
    spawn: Any
    kubeconfig: str
    ns: str
    cfg: Path
    queue: str
    controller: Any = None

    # -- our controller (and its agent)
    def start_agent(self) -> None:
        self.controller = self.spawn("controller", ours.controller_argv(self.kubeconfig, self.cfg, self.ns))

    def stop_agent(self) -> None:
        """Stopped gracefully: it hands its Lease back, so the next one leads at once."""
        self.box.stop(self.controller.name)
        self.controller = None

    # -- jobs and pods
    def create(self, name: str, workers: int, elastic: tuple[int, int] | None) -> None:
        self.kc.create(PYTORCHJOBS, pytorchjob(name, self.queue, workers, elastic), self.ns)

    def pods(self, job: str) -> list[dict[str, Any]]:
        return self.kc.list(PODS, self.ns, label_selector=f"training.kubeflow.org/job-name={job}")[0]

    def running(self, job: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods(job)
                      if (p.get("status") or {}).get("phase") == "Running"
                      and not p["metadata"].get("deletionTimestamp"))

    def gated(self, job: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods(job) if (p.get("spec") or {}).get("schedulingGates"))

    def counts(self, *jobs: str) -> dict[str, tuple[int, int]]:
        """Job -> (running, gated), for messages."""
        return {j: (len(self.running(j)), len(self.gated(j))) for j in jobs}

    def wait_running(self, job: str, n: int, timeout: float = 120) -> None:
        wait_until(f"{job} runs {n} pod(s)", lambda: len(self.running(job)) == n, timeout)

    def finish(self, job: str) -> None:
        """Every pod of ``job`` ends as a completed container would (kwok runs no containers)."""
        for p in self.pods(job):
            status = {"phase": "Succeeded", "containerStatuses": [{
                "name": "pytorch", "ready": False, "restartCount": 0, "image": "pytorch", "imageID": "",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
            self.kc.patch(PODS, p["metadata"]["name"], {"status": status}, self.ns, subresource="status")
        wait_until(f"{job}'s pods Succeeded", lambda: all(
            (p.get("status") or {}).get("phase") == "Succeeded" for p in self.pods(job)), 30)

    def pg(self, job: str) -> dict[str, str]:
        try:
            return dict(self.kc.get(PODGROUPS, job, self.ns)["metadata"].get("annotations") or {})
        except NotFoundError:
            return {}

    def ours(self, job: str, min_member: int) -> None:
        """Wait until our controller made ``job``'s PodGroup ours, with its min as minMember."""
        def done() -> bool:
            try:
                pg = self.kc.get(PODGROUPS, job, self.ns)
            except NotFoundError:
                return False
            return ((pg["metadata"].get("labels") or {}).get(keys.MANAGED_BY_LABEL) == keys.MANAGED_BY
                    and pg["spec"].get("minMember") == min_member)
        wait_until(f"{job}'s PodGroup ours with minMember {min_member}", done, 60)

    def events(self, reason: str, name: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.kc.list(EVENTS, self.ns)[0] if e.get("reason") == reason
                and (name is None or (e.get("involvedObject") or {}).get("name") == name)]

    def rest_over(self, *jobs: str) -> None:
        """Sleep until each of ``jobs`` is out of its cooldown (its PodGroup's last-scale-time)."""
        for job in jobs:
            at = parse_time(self.pg(job).get(keys.LAST_SCALE_TIME))
            if at is not None:
                left = at.timestamp() + COOLDOWN + 1 - time.time()
                if left > 0:
                    time.sleep(left)

    # -- the read-only commands, as a person would run them against the box
    def cli(self, *args: str) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-m", "elastic_controller", *args], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    def plan(self, tmp: Path) -> dict[str, Any]:
        dump = tmp / f"dump-{uuid.uuid4().hex[:4]}.json"
        dump.write_text(self.box.kubectl("get", "nodes,pods,podgroups,queues,priorityclasses,pytorchjobs", "-A",
                                         "-o", "json").stdout)
        return self.cli("plan", "--from", str(dump), "--config", str(self.cfg), "-o", "json")

    def status(self) -> dict[str, dict[str, Any]]:
        doc = self.cli("status", "--kubeconfig", self.kubeconfig, "--config", str(self.cfg), "-n", self.ns,
                       "-o", "json")
        return {r["job"]: r for rows in doc["queues"].values() for r in rows}


@contextmanager
def our_stack(kc: KubeClient, box: Any, box_process: Any, kubeconfig: str, ns: str,
              serving_cert: tuple[Path, Path], tmp_path: Path, config: str) -> Iterator[Box]:
    """Our webhook (registered) and controller with ``config``, one Queue; all gone afterwards."""
    wait_until("no other test's pod on a node", lambda: not [
        q for q in kc.list(PODS)[0] if q["metadata"]["namespace"] != ns
        and q["metadata"]["namespace"].startswith("t-") and (q.get("spec") or {}).get("nodeName")], 120)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config)
    port = free_port()
    ours.start_webhook(box_process, ours.webhook_argv(serving_cert[0], serving_cert[1], port, cfg), port)
    hook = f"volcano-elastic-fair-{uuid.uuid4().hex[:5]}"
    register_webhook(kc, box, port, hook)
    queue = f"fair-{uuid.uuid4().hex[:5]}"
    kc.create(QUEUES, {"metadata": {"name": queue}, "spec": {"weight": 1, "reclaimable": True}})
    wait_until(f"queue {queue} Open", lambda: (kc.get(QUEUES, queue).get("status") or {}).get("state") == "Open", 60)
    st = Box(kc, box, box_process, kubeconfig, ns, cfg, queue)
    st.start_agent()
    try:
        yield st
    finally:
        for res, name in ((QUEUES, queue), (WEBHOOKS, hook)):
            try:
                kc.delete(res, name)
            except KubeError:
                pass


def test_the_least_served_job_grows_first(kc: KubeClient, box: Any, box_process: Any,
                                          kubeconfig: str, namespace: str, serving_cert: tuple[Path, Path],
                                          tmp_path: Path) -> None:
    """``rich`` (min 2, max 16) has run 5 workers since early on; ``poor`` (min 1, max 3) came later and
    runs 2. Both wait with gated workers; a rigid job ends and frees room for one worker. By
    fulfillment ``rich`` would grow ((5-2)/14 against (2-1)/2); by attained service ``poor`` does. The
    fairness scale-down is off here, so that only the growth order moves workers."""
    started = time.monotonic()
    with our_stack(kc, box, box_process, kubeconfig, namespace, serving_cert, tmp_path,
                   _config(fairnessScaleDown=False)) as st:
        ns = namespace
        st.create("f", 1, None)  # rigid, 1 worker: the room that frees at the end
        st.create("g", 2, None)  # rigid, 2 workers: the room poor starts in
        st.wait_running("f", 1)
        st.wait_running("g", 2)
        st.create("rich", 16, (2, 16))
        st.wait_running("rich", 5)  # its min, then 3 elastic workers: the box is full
        st.create("poor", 3, (1, 3))
        st.ours("poor", 1)  # its gang waits for room (no victim: it does not starve)
        # poor's gang is placed while no agent runs (no growth of rich races it for the second slot);
        # then the agent grows poor to 2 (the only job that fits 1 -> 2 by either order: 0 against 3/14)
        st.stop_agent()
        st.finish("g")
        st.wait_running("poor", 1)
        st.start_agent()
        wait_until("poor runs 2 of its 3", lambda: len(st.running("poor")) == 2, 60)
        assert st.counts("rich", "poor") == {"rich": (5, 11), "poor": (2, 1)}, "the story's start"

        # The room for one worker, while no agent runs; both jobs free to grow, out of cooldown.
        st.stop_agent()
        st.finish("f")
        st.rest_over("rich", "poor")
        plan = st.plan(tmp_path)
        grown = sorted({g["job"] for g in plan["gateReleases"]})
        assert grown == [f"{ns}/poor"], plan["gateReleases"]
        release = plan["gateReleases"][0]
        assert release["pod"] == f"{ns}/poor-worker-2" and "least served job first" in release["reason"], release
        served = {a["job"]: a["gpuSeconds"] for a in plan["attainedService"]}
        assert served[f"{ns}/rich"] > 2 * served[f"{ns}/poor"] > 0, served
        rows = st.status()
        assert rows[f"{ns}/poor"]["gatedReason"]["reason"] == "Growing", rows[f"{ns}/poor"]
        assert "least served job first" in rows[f"{ns}/poor"]["gatedReason"]["message"], rows[f"{ns}/poor"]
        assert rows[f"{ns}/rich"]["gatedReason"]["reason"] == "NoRoom", rows[f"{ns}/rich"]
        assert rows[f"{ns}/rich"]["attainedGpuSeconds"] > 2 * rows[f"{ns}/poor"]["attainedGpuSeconds"], rows

        # A new agent does it.
        rich_ups = len(st.events("ScaledUp", "rich"))
        st.start_agent()
        wait_until("poor runs its 3", lambda: len(st.running("poor")) == 3, 60)
        time.sleep(3)  # and rich gets nothing: there is no room left
        assert st.counts("rich", "poor") == {"rich": (5, 11), "poor": (3, 0)}
        assert len(st.events("ScaledUp", "rich")) == rich_ups
        assert "least served job first" in sentence_of(st.pg("poor").get(keys.LAST_DECISION)), st.pg("poor")
        ups = wait_until("poor's ScaledUp Event", lambda: [e for e in st.events("ScaledUp", "poor")
                                                          if "least served job first" in e["message"]], 30)
        assert ups, st.events("ScaledUp", "poor")
        rows = st.status()
        assert "least served job first" in rows[f"{ns}/poor"]["lastDecision"], rows[f"{ns}/poor"]
        stamp = st.pg("rich").get(keys.ATTAINED_SERVICE)  # written when one of its pods left: none did
        print(f"poor grew first; rich {rows[f'{ns}/rich']['attainedGpuSeconds']} GPU-s, poor "
              f"{rows[f'{ns}/poor']['attainedGpuSeconds']} GPU-s (rich's stamp {stamp}); "
              f"test {time.monotonic() - started:.0f}s")


def test_the_fairness_scale_down_moves_workers_to_the_least_served(
        kc: KubeClient, box: Any, box_process: Any, kubeconfig: str, namespace: str,
        serving_cert: tuple[Path, Path], tmp_path: Path) -> None:
    """``rich`` (min 2, max 7) has run 7 workers since early on; ``poor`` (min 1, max 4) came later and
    runs its min, its 3 elastic workers gated, and there is no room. Nothing starves, no gate can be
    lifted: the agent evicts rich's newest elastic worker (the Eviction API), as few as make room for
    poor's next growth (minScaleUpGain 1: 1 -> 2), and poor grows into the room."""
    started = time.monotonic()
    story = {"fairnessScaleDown": True, "fairnessRatio": 2, "fairnessMinGpuSeconds": 60}
    with our_stack(kc, box, box_process, kubeconfig, namespace, serving_cert, tmp_path, _config(**story)) as st:
        ns = namespace
        st.create("g", 1, None)  # rigid, 1 worker: the room poor starts in
        st.wait_running("g", 1)
        # minScaleUpGain 0 while rich starts: the operator makes its 7 pods one by one, and on a loaded
        # box the agent can see 6 first (no first rendezvous here) and then hold the 7th (+17% < 1)
        st.create("rich", 7, (2, 7))
        st.wait_running("rich", 7)
        st.create("poor", 4, (1, 4))
        st.ours("poor", 1)
        st.stop_agent()
        st.cfg.write_text(_config(**story, minScaleUpGain=1))  # the story's rule, for `plan` and the next agent
        st.finish("g")
        st.wait_running("poor", 1)
        assert st.counts("rich", "poor") == {"rich": (7, 0), "poor": (1, 3)}, "the story's start"
        st.rest_over("rich")  # rich may give again (its growth to 7 started a cooldown)

        plan = st.plan(tmp_path)
        assert not plan["starving"] and not plan["gateReleases"], plan
        assert [(e["pod"], e["for"]) for e in plan["evictions"]] == [(f"{ns}/rich-worker-6", f"{ns}/poor")], plan
        reason = plan["evictions"][0]["reason"]
        assert reason.startswith(f"fairness: job {ns}/poor waits to grow with 1 of max 4 workers"), reason
        assert f"job {ns}/rich of the same queue {st.queue}" in reason, reason
        rows = st.status()
        victim = rows[f"{ns}/rich"]["victimOf"]
        assert victim and victim["for"] == f"{ns}/poor" and victim["pods"] == [f"{ns}/rich-worker-6"], rows
        assert victim["kind"] == "fairness", victim  # not a gang's victim
        assert plan["evictions"][0]["kind"] == "fairness", plan
        taker = rows[f"{ns}/poor"]["gatedReason"]  # not NoRoom: the plan frees room for it this cycle
        assert taker["reason"] == "Growing" and f"fairness scale-down (from {ns}/rich)" in taker["message"], taker
        assert rows[f"{ns}/rich"]["attainedGpuSeconds"] > 2 * rows[f"{ns}/poor"]["attainedGpuSeconds"], rows
        rich_before = rows[f"{ns}/rich"]["attainedGpuSeconds"]

        decisions: list[Decision] = []
        watching = _decisions_of(kc, ns, "rich", decisions)
        st.start_agent()
        evicted = wait_until("rich-worker-6 evicted for poor", lambda: st.events("EvictedForGang", "rich-worker-6"), 60)
        assert f"fairness: job {ns}/poor waits to grow" in evicted[0]["message"], evicted
        assert f"for the fairness scale-down: its room goes to {ns}/poor" in evicted[0]["message"], evicted
        assert all(e["involvedObject"]["name"].startswith("rich-worker-") for e in st.events("EvictedForGang"))
        wait_until("poor grows into the room", lambda: len(st.running("poor")) >= 2, 60)
        assert len(st.running("rich")) >= 2  # never below its min
        down = st.pg("rich")
        assert down.get(keys.LAST_SCALE_DIRECTION) == "down", down
        gives = f"to give their room to {ns}/poor, the least-served job of the queue (fairness scale-down)"
        scaling = wait_until("rich's ScalingDown Event", lambda: st.events("ScalingDown", "rich"), 30)
        assert scaling and all(gives in e["message"] and "gang" not in e["message"] for e in scaling), scaling
        scaled = wait_until("rich's ScaledDown Event", lambda: st.events("ScaledDown", "rich"), 30)
        assert scaled and all(gives in e["message"] and "gang" not in e["message"] for e in scaled), scaled
        # rich's last-decision said so (a cycle later the Snoozed hold on its regrowth replaces it)
        watching.join(30)
        said = next((d for d in decisions if d.kind == "down"), None)
        assert said is not None and said.extra.get("fairness") is True and said.gang == f"{ns}/poor", decisions
        assert "fairness scale-down" in said.text, said
        print(f"rich's Events: {[e['message'] for e in scaling + scaled]}; its last-decision: {said.sentence}")
        ups = wait_until("poor's ScaledUp Event", lambda: st.events("ScaledUp", "poor"), 30)
        assert any("least served job first" in e["message"] for e in ups), ups
        # the worker that left took its time with it: the agent wrote rich's service on its PodGroup
        stamp = wait_until("rich's attained-service stamp",
                           lambda: parse_stamp(st.pg("rich").get(keys.ATTAINED_SERVICE)), 30)
        assert stamp.gpu_seconds >= rich_before, (stamp, rich_before)
        print(f"rich gave rich-worker-6 to poor; rich's stamp {stamp.gpu_seconds} GPU-s (status said {rich_before} "
              f"before); now {st.counts('rich', 'poor')}; test {time.monotonic() - started:.0f}s")
