"""Our stack on a whole box for the e2e tier and the benchmarks that drive a box: the webhook and the
controller started as processes of the box (the webhook registered with the API server), an
ElasticConfig for them, PyTorchJobs, and the Scenario of job A making room for gang B."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError, NotFoundError
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PODS, PYTORCHJOBS, QUEUES, Resource
from hack.localbox import ours
from hack.localbox.procs import free_port
from tests.harness.kubeflow import pytorchjob_manifest
from tests.harness.legacy import LEGACY_FLOW
from tests.harness.waiting import wait_until as _wait_until

WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                    "MutatingWebhookConfiguration", namespaced=False)
GPUS_PER_WORKER = 4
COOLDOWN = 30


def wait_until(what: str, fn: Callable[[], Any], timeout: float = 120, interval: float = 0.5) -> Any:
    return _wait_until(what, fn, timeout, interval)


def pytorchjob(name: str, queue: str, workers: int, elastic: tuple[int, int] | None,
               master: bool = False) -> dict[str, Any]:
    template = {"spec": {"containers": [{
        "name": "pytorch", "image": "docker.io/pytorch/pytorch:latest", "command": ["torchrun", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": str(GPUS_PER_WORKER), "cpu": "1", "memory": "1Gi"}}}]}}
    return pytorchjob_manifest(name, queue, workers, elastic, template, master=master)


def config_text(gating: bool = True) -> str:
    return (f"agent: {{intervalSeconds: 1}}\n"
            f"gating: {{enabled: {'true' if gating else 'false'}}}\n"
            f"defaults: {{cooldownSeconds: {COOLDOWN}, minRuntimeSeconds: 5, starvationSeconds: 3,"
            f" maxScaleUpPerCycle: 8, minScaleUpGain: 0.3, {LEGACY_FLOW}}}\n")  # A regrows 6 -> 8 (+33 %) after B


@dataclass
class Observed:
    a_running_min: int = 1 << 30
    master_uids: set[str] = field(default_factory=set)
    a_deleted: list[str] = field(default_factory=list)  # A pods that went away (evicted or preempted)
    b_running_at: float | None = None


class Scenario:
    """Drives jobs A and B in ``ns`` and samples what happens to A while B starts."""

    def __init__(self, kc: KubeClient, ns: str, tag: str | None = None) -> None:
        self.kc = kc
        self.ns = ns
        tag = tag or uuid.uuid4().hex[:5]
        self.qa, self.qb = f"dept-a-{tag}", f"dept-b-{tag}"
        self.obs = Observed()
        self._stop = threading.Event()
        self._seen: dict[str, str] = {}

    # -- setup
    def queues(self) -> None:
        for q in (self.qa, self.qb):
            self.kc.create(QUEUES, {"metadata": {"name": q}, "spec": {"weight": 1, "reclaimable": True}})
        for q in (self.qa, self.qb):
            wait_until(f"queue {q} Open",
                       lambda q=q: (self.kc.get(QUEUES, q).get("status") or {}).get("state") == "Open", 60)

    def delete_queues(self) -> None:
        for q in (self.qa, self.qb):
            try:
                self.kc.delete(QUEUES, q)
            except KubeError:
                pass

    # -- observation
    def pods(self, job: str) -> list[dict[str, Any]]:
        return self.kc.list(PODS, self.ns, label_selector=f"training.kubeflow.org/job-name={job}")[0]

    def running(self, job: str) -> list[dict[str, Any]]:
        return [p for p in self.pods(job) if (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]

    def _sample(self) -> None:
        while not self._stop.wait(0.3):
            try:
                pods = self.pods("a")
            except KubeError:
                continue
            now = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods
                   if not p["metadata"].get("deletionTimestamp")}
            for uid, name in self._seen.items():
                if uid not in now:
                    self.obs.a_deleted.append(name)
            self._seen = now
            run = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp")]
            self.obs.a_running_min = min(self.obs.a_running_min, len(run))
            for p in pods:
                if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/replica-index") == "0":
                    self.obs.master_uids.add(p["metadata"]["uid"])
            if self.obs.b_running_at is None and len(self.running("b")) >= 2:
                self.obs.b_running_at = time.monotonic()

    # -- the story
    def fill_with_a(self, workers: int = 8, timeout: float = 180) -> None:
        # A fills the cluster: an earlier test's pods, still going with their namespace (deleted in
        # the background), would keep A below its max (seen once in CI on a loaded machine).
        wait_until("no other test's pod on a node", lambda: not [
            q for q in self.kc.list(PODS)[0] if q["metadata"]["namespace"] != self.ns
            and q["metadata"]["namespace"].startswith("t-") and (q.get("spec") or {}).get("nodeName")], 120)
        self.kc.create(PYTORCHJOBS, pytorchjob("a", self.qa, workers, (2, workers)), self.ns)
        try:
            wait_until(f"A runs {workers} workers", lambda: len(self.running("a")) >= workers, timeout)
        except AssertionError as exc:  # flaky in CI twice on 2026-11-27: say what A's pods were doing
            pods = [(q["metadata"]["name"], (q.get("status") or {}).get("phase"), (q.get("spec") or {}).get("nodeName"),
                     [g.get("name") for g in (q.get("spec") or {}).get("schedulingGates") or []],
                     sorted((q["metadata"].get("annotations") or {}).keys())) for q in self.pods("a")]
            others = [(f"{q['metadata']['namespace']}/{q['metadata']['name']}", (q.get("status") or {}).get("phase"),
                       q["spec"]["nodeName"]) for q in self.kc.list(PODS)[0]
                      if q["metadata"]["namespace"] != self.ns and (q.get("spec") or {}).get("nodeName")]
            raise AssertionError(f"{exc}; A's pods (name, phase, node, gates, annotations): {pods}; other pods on "
                                 f"nodes: {others}") from exc

    def start_b(self) -> float:
        self._seen = {p["metadata"]["uid"]: p["metadata"]["name"] for p in self.pods("a")}
        threading.Thread(target=self._sample, daemon=True).start()
        t0 = time.monotonic()
        self.kc.create(PYTORCHJOBS, pytorchjob("b", self.qb, 2, None), self.ns)
        return t0

    def finish_b(self) -> None:
        for p in self.pods("b"):
            status = {"phase": "Succeeded", "containerStatuses": [{
                "name": "pytorch", "ready": False, "restartCount": 0, "image": "pytorch", "imageID": "",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
            self.kc.patch(PODS, p["metadata"]["name"], {"status": status}, self.ns, subresource="status")

    def stop(self) -> None:
        self._stop.set()

    def annotations(self, pg: str) -> dict[str, str]:
        try:
            return dict(self.kc.get(PODGROUPS, pg, self.ns)["metadata"].get("annotations") or {})
        except NotFoundError:
            return {}

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.kc.list(EVENTS, self.ns)[0] if e.get("reason") == reason]


def register_webhook(kc: KubeClient, box: Any, port: int, name: str) -> None:
    """Our pod webhook on 127.0.0.1:``port`` (a certificate of the box CA) registered as ``name``."""
    kc.create(WEBHOOKS, ours.pod_webhook(name, port, box.ca_bundle))


def start_stack(kc: KubeClient, box: Any, box_process: Any, kubeconfig: str, cfg: Path, cert: tuple[Path, Path],
                ns: str, agent: bool = True) -> str:
    """Our webhook (registered for real) and our controller (with its agent unless ``agent`` is false)."""
    port = free_port()
    ours.start_webhook(box_process, ours.webhook_argv(cert[0], cert[1], port, cfg), port)
    name = f"volcano-elastic-e2e-{uuid.uuid4().hex[:5]}"
    register_webhook(kc, box, port, name)
    box_process("controller", ours.controller_argv(kubeconfig, cfg, ns, agent=agent))
    return name


@contextmanager
def stack_scenario(kc: KubeClient, box: Any, box_process: Any, kubeconfig: str, namespace: str,
                   serving_cert: tuple[Path, Path], tmp_path: Path, config: str) -> Iterator[Scenario]:
    """Our stack on the box with ``config``, and a ``Scenario`` with its two queues; afterwards the
    scenario stops, its queues go and our webhook registration is removed."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config)
    hook = start_stack(kc, box, box_process, kubeconfig, cfg, serving_cert, namespace)
    sc = Scenario(kc, namespace)
    sc.queues()
    try:
        yield sc
    finally:
        sc.stop()
        sc.delete_queues()
        try:
            kc.delete(WEBHOOKS, hook)
        except KubeError:
            pass


@pytest.fixture
def kc(kubeconfig: str) -> Any:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


def podgroup_gone(kc: KubeClient, ns: str, name: str) -> bool:
    try:
        kc.get(PODGROUPS, name, ns)
        return False
    except NotFoundError:
        return True


def delete_quietly(kc: KubeClient, namespace: str, jobs: tuple[str, ...], cluster: tuple[tuple[str, Resource], ...],
                   ) -> None:
    """A scenario's cleanup: its PyTorchJobs in ``namespace``, then cluster-scoped (name, resource)
    pairs (its webhook configuration, its queue); what is gone already is no error."""
    for job in jobs:
        try:
            kc.delete(PYTORCHJOBS, job, namespace)
        except KubeError:
            pass
    for name, res in cluster:
        try:
            kc.delete(res, name)
        except KubeError:
            pass
