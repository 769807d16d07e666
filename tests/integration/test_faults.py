"""Faults against a real kube-apiserver (issue 23, items 1, 2, 4, 6, 7, 9): a plan interrupted at a
named step (the ``VOLCANO_ELASTIC_FAULT`` hook), a forged ``evicted-for``, a PodGroup deleted by hand
and an unreadable stamp, a leader past its Lease, and an API outage (a TCP proxy in front of the
real API server that drops every connection for a while)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_controller.agent import Agent, InjectedFault
from elastic_controller.cli.controller import Health
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.leader import LeaderElector, LeaseSettings
from elastic_controller.kube.resources import LEASES, PODGROUPS, PODS, PYTORCHJOBS
from tests.harness import agentbox as support
from tests.harness import builders as b
from tests.harness.agentbox import EVICTED_FOR, FAST, LAST, Cluster, clean, scenario, terminating, wait_until
from tests.harness.legacy import LEGACY_FLOW

kc, cluster, harness = support.kc, support.cluster, support.harness  # fixtures

pytestmark = pytest.mark.integration


def reasons(c: Cluster) -> list[tuple[str, str, str]]:
    return sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in c.events())


def with_job_object(c: Cluster, **kw: Any) -> None:
    job = b.pytorchjob(c.ns, "a", workers=6, min_r=2, max_r=6, **kw)
    c.kc.create(PYTORCHJOBS, clean(job, c.ns), c.ns)


@pytest.mark.parametrize("step", ["victims-stamped", "jobs-stamped", "evicted-one"])
def test_a_plan_interrupted_at_any_step_is_finished_at_once_with_its_events(cluster: Cluster, harness: Any,
                                                                            step: str) -> None:
    """Items 1 and 2: the next agent finishes the plan in its first cycle (the gang is not left
    behind a cooldown of evictions that never happened) and every eviction has its Event."""
    scenario(cluster)
    h = harness()
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    h.agent.faults = {step: "raise"}
    with pytest.raises(InjectedFault):
        h.agent.run_cycle()
    h.stop()
    restarted = harness()  # a new process: new caches, empty ledger
    restarted.settle(PODS, cluster.ns, "a-worker-5",
                     lambda o: EVICTED_FOR in (o["metadata"].get("annotations") or {}))
    report = restarted.agent.run_cycle()
    assert terminating(cluster) == ["a-worker-4", "a-worker-5"], report
    got = reasons(cluster)
    assert ("Pod", "a-worker-4", "EvictedForGang") in got and ("Pod", "a-worker-5", "EvictedForGang") in got
    assert any(r[2] == "ScaledDown" for r in got)
    ann = cluster.pg("a")["metadata"]["annotations"]
    assert ann["volcano-elastic.io/last-scale-direction"] == "down" and f"room for {cluster.ns}/b" in \
        ann["volcano-elastic.io/last-decision"]


def test_a_forged_evicted_for_on_a_master_is_refused(cluster: Cluster, harness: Any) -> None:
    """Item 6: patching the annotation onto a job's master does not get it evicted."""
    n = cluster.node(gpus=8)
    cluster.add(support.elastic_job(cluster.ns, "a", n, min_r=2, max_r=6),
                support.gang(cluster.ns, "b", n, members=1))  # fits: no plan of its own
    cluster.kc.patch(PODS, "a-worker-0", {"metadata": {"annotations": {EVICTED_FOR: f"{cluster.ns}/b"}}},
                     cluster.ns)
    h = harness()
    h.settle(PODS, cluster.ns, "a-worker-0", lambda o: EVICTED_FOR in (o["metadata"].get("annotations") or {}))
    report = h.agent.run_cycle()
    assert f"{cluster.ns}/a-worker-0" in report.refused
    time.sleep(2)
    assert terminating(cluster) == []
    assert EVICTED_FOR not in (cluster.pod("a-worker-0")["metadata"].get("annotations") or {})
    assert ("Pod", "a-worker-0", "EvictionRefused") in reasons(cluster)


def test_the_jobs_copy_of_the_stamp_is_never_read_and_is_set_back(cluster: Cluster, harness: Any) -> None:
    """Item 4, revised by issue 36 (T3/T4): the stamp is copied to the PyTorchJob for people, but the
    job is its owner's to write, so only the PodGroup's record is read. A PodGroup recreated bare
    starts without a cooldown (an admin's act, docs/failure-model.md); the job's copy that now
    differs is set back to the PodGroup's with a Warning Event, as is a tenant's unreadable stamp."""
    scenario(cluster)
    with_job_object(cluster)
    h = harness()
    h.settle(PYTORCHJOBS, cluster.ns, "a", lambda o: True)
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    assert len(h.agent.run_cycle().evicted) == 2
    job = cluster.kc.get(PYTORCHJOBS, "a", cluster.ns)
    assert job["metadata"]["annotations"][LAST] == cluster.pg("a")["metadata"]["annotations"][LAST]
    cluster.kc.delete(PODGROUPS, "a", cluster.ns)
    cluster.add([b.podgroup(cluster.ns, "a", 2)])
    h.settle(PODGROUPS, cluster.ns, "a", lambda o: LAST not in (o["metadata"].get("annotations") or {}))
    h.agent.run_cycle()
    assert LAST not in (cluster.kc.get(PYTORCHJOBS, "a", cluster.ns)["metadata"].get("annotations") or {})
    assert any(r[2] == "UntrustedJobAnnotation" for r in reasons(cluster))
    # an unreadable stamp the tenant writes on its job: not read, removed again (the PodGroup has none)
    cluster.kc.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": {LAST: "last tuesday"}}}, cluster.ns)
    h.settle(PYTORCHJOBS, cluster.ns, "a", lambda o: (o["metadata"].get("annotations") or {}).get(LAST)
             == "last tuesday")
    h.agent.run_cycle()
    assert LAST not in (cluster.kc.get(PYTORCHJOBS, "a", cluster.ns)["metadata"].get("annotations") or {})


def test_a_leader_past_its_lease_writes_nothing(cluster: Cluster, harness: Any, kc: KubeClient) -> None:
    """Item 7: a leader that could not renew within its renew deadline (paused) stops before its
    next write, while another replica takes the Lease."""
    scenario(cluster)
    settings = LeaseSettings(f"faults-{cluster.ns}", cluster.ns, lease_duration=3, renew_deadline=2,
                             retry_period=0.5)
    old = LeaderElector(kc, "old", settings)
    assert old.try_acquire_or_renew()
    old._leading.set()  # as run() does after acquiring
    h = harness()
    h.agent.may_write = old.leading_now
    h.settle(PODS, cluster.ns, "b-3", lambda o: True)
    time.sleep(3.5)  # "SIGSTOP": no renewal past the renew deadline and the lease duration
    new = LeaderElector(kc, "new", settings)
    wait_until("the new replica takes the Lease", new.try_acquire_or_renew, timeout=10)
    report = h.agent.run_cycle()  # the old leader resumes
    assert report.not_leader and report.evicted == []
    assert terminating(cluster) == []
    assert EVICTED_FOR not in (cluster.pod("a-worker-5")["metadata"].get("annotations") or {})
    assert kc.get(LEASES, settings.name, cluster.ns)["spec"]["holderIdentity"] == "new"


class Proxy:
    """A TCP proxy to the API server that can drop every connection and refuse new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = threading.Event()
        self.up.set()
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, server]
            for a, z in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, z), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, z: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                z.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, z):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        self.up.clear()
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def close(self) -> None:
        self.cut()
        self.listener.close()


def test_after_an_api_outage_caches_relist_promptly_and_stale_ones_are_not_acted_on(
        box: Any, cluster: Cluster, tmp_path: Path) -> None:
    """Item 9: caches are stale from the outage until relisted, /readyz says so, the agent does not
    act meanwhile, and the caches are fresh within ~2 s of the API server answering again."""
    scenario(cluster)
    host, port = box.server.removeprefix("https://").rsplit(":", 1)
    proxy = Proxy((host, int(port)))
    conf = yaml.safe_load(Path(box.kubeconfig).read_text())
    for c in conf["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    path = tmp_path / "via-proxy.kubeconfig"
    path.write_text(yaml.safe_dump(conf))
    client = KubeClient.from_kubeconfig(str(path))
    caches = Caches(client)
    caches.start()
    try:
        assert caches.wait_synced(30)
        health = Health(caches, stale_after=60)
        agent = Agent(client, caches, FAST, EventRecorder(client))
        wait_until("b-3 cached", lambda: caches.get(PODS, "b-3", cluster.ns) is not None)
        proxy.cut()  # the API server is unreachable
        wait_until("caches known stale", lambda: len(caches.stale()) == len(caches.informers), timeout=15)
        assert health.readyz()[0] == 503 and "stale" in health.readyz()[1]
        report = agent.run_cycle()
        assert report.stale and report.evicted == []
        cluster.kc.patch(PODS, "b-3", {"metadata": {"labels": {"during": "outage"}}}, cluster.ns)
        time.sleep(6)  # long enough for an uncapped backoff to grow past 6 s
        came_back = time.monotonic()
        proxy.up.set()
        wait_until("caches fresh again", lambda: not caches.stale(), timeout=20, interval=0.05)
        took = time.monotonic() - came_back
        assert took < 4.5, f"caches relisted {took:.1f}s after the API server answered again"
        assert health.readyz() == (200, "ok")
        assert caches.get(PODS, "b-3", cluster.ns)["metadata"]["labels"]["during"] == "outage"
        report = agent.run_cycle()
        assert sorted(report.evicted) == [f"{cluster.ns}/a-worker-4", f"{cluster.ns}/a-worker-5"]
    finally:
        caches.stop()
        client.close()
        proxy.close()


def test_controller_process_killed_mid_plan_the_next_one_finishes_it_within_seconds(
        cluster: Cluster, box_process: Any, kubeconfig: str, tmp_path: Path) -> None:
    """Item 1 end to end: a controller process dies like kill -9 right after stamping the victims'
    job (VOLCANO_ELASTIC_FAULT=jobs-stamped=exit); the next process evicts the plan's victims within
    seconds of starting (not after the 300 s cooldown its predecessor stamped), with every Event."""
    import sys

    scenario(cluster)
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: volcano-elastic.io/v1alpha1\nkind: ElasticConfig\n"
                      "agent: {intervalSeconds: 1}\n"
                      "defaults: {starvationSeconds: 0, minRuntimeSeconds: 0, cooldownSeconds: 300,"
                      f" {LEGACY_FLOW}}}\n")
    argv = [sys.executable, "-m", "elastic_controller", "controller", f"--kubeconfig={kubeconfig}",
            f"--config={config}", "--http-port=0", "--no-leader-elect"]
    first = box_process("doomed", argv, env={"VOLCANO_ELASTIC_FAULT": "jobs-stamped=exit"})
    wait_until("the first controller dies mid-plan", lambda: not alive(first.pid), timeout=60)
    assert "fault injected" in Path(first.log).read_text()
    ann = cluster.pg("a")["metadata"].get("annotations") or {}
    assert ann.get(LAST) and terminating(cluster) == []  # cooling, nothing evicted: the old trap
    started = time.monotonic()
    box_process("successor", argv)
    wait_until("the successor evicts the plan's victims",
               lambda: terminating(cluster) == ["a-worker-4", "a-worker-5"], timeout=60)
    took = time.monotonic() - started
    assert took < 30, f"the successor needed {took:.0f}s"
    wait_until("their Events", lambda: {("Pod", "a-worker-4", "EvictedForGang"),
                                         ("Pod", "a-worker-5", "EvictedForGang")} <= set(reasons(cluster)))


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
