"""The PodGroup controller, leader election and watch resilience against a real kube-apiserver."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import NotFoundError
from elastic_controller.kube.resources import EVENTS, LEASES, PODGROUPS, PODS, PYTORCHJOBS
from tests.harness import agentbox as support
from tests.harness import builders as b
from tests.harness import controllerbox
from tests.harness.agentbox import Cluster, clean, wait_until
from tests.harness.controllerbox import Running, job, pg_of

controller = controllerbox.controller  # a fixture

kc, cluster = support.kc, support.cluster  # fixtures

pytestmark = pytest.mark.integration


def reasons(kc: KubeClient, ns: str) -> set[str]:
    return {e["reason"] for e in kc.list(EVENTS, ns)[0]}


def test_podgroup_fields_ownership_and_garbage_collection(kc: KubeClient, namespace: str,
                                                          controller: Running) -> None:
    created = kc.create(PYTORCHJOBS, job(namespace, "j", workers=6, min_r=2, max_r=6, master=True,
                                         queue="default", priority_class="high"), namespace)
    pg = wait_until("PodGroup", lambda: pg_of(kc, namespace, "j"))
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"master": 1, "worker": 2}
    assert pg["spec"]["minResources"] == {"cpu": "12", "memory": "48Gi", "nvidia.com/gpu": "3"}
    assert pg["spec"]["queue"] == "default" and pg["spec"]["priorityClassName"] == "high"
    assert pg["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "volcano-elastic"
    ref = pg["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == \
        ("PyTorchJob", created["metadata"]["uid"], True, True)
    # Only our fields were written, by us, as an Update (merge patch / create), never a PUT of Volcano's.
    assert {m["manager"] for m in pg["metadata"]["managedFields"]} == {"volcano-elastic"}
    kc.delete(PYTORCHJOBS, "j", namespace)
    wait_until("PodGroup garbage-collected", lambda: pg_of(kc, namespace, "j") is None, timeout=60)


def test_update_on_job_change_keeps_foreign_fields(kc: KubeClient, namespace: str, controller: Running) -> None:
    kc.create(PYTORCHJOBS, job(namespace, "j", workers=4, min_r=2, max_r=4), namespace)
    wait_until("PodGroup", lambda: pg_of(kc, namespace, "j"))
    # Volcano writes status and its own annotations into the same object.
    kc.patch(PODGROUPS, "j", {"metadata": {"annotations": {"scheduling.volcano.sh/x": "1"}},
                              "status": {"phase": "Inqueue"}}, namespace)
    kc.patch(PYTORCHJOBS, "j", {"spec": {"elasticPolicy": {"minReplicas": 3},
                                         "runPolicy": {"schedulingPolicy": {"queue": "other"}}}}, namespace)
    pg = wait_until("PodGroup updated", lambda: (p := pg_of(kc, namespace, "j")) and
                    p["spec"]["minMember"] == 3 and p["spec"]["queue"] == "other" and p)
    assert pg["spec"]["minResources"]["nvidia.com/gpu"] == "3"
    assert pg["metadata"]["annotations"]["scheduling.volcano.sh/x"] == "1"
    assert pg["status"]["phase"] == "Inqueue"
    assert "QueueNotFound" in reasons(kc, namespace)


def test_invalid_and_foreign_jobs_are_refused_with_events(kc: KubeClient, namespace: str,
                                                          controller: Running) -> None:
    kc.create(PYTORCHJOBS, job(namespace, "bad", workers=4, min_r=5, max_r=4), namespace)
    foreign = clean(b.podgroup(namespace, "theirs", 3), namespace)
    foreign["metadata"]["labels"] = {}
    kc.create(PODGROUPS, foreign, namespace)
    kc.create(PYTORCHJOBS, job(namespace, "theirs", workers=4, min_r=2, max_r=4), namespace)
    wait_until("warnings", lambda: {"InvalidElasticPolicy", "ForeignPodGroup"} <= reasons(kc, namespace))
    assert pg_of(kc, namespace, "bad") is None
    assert pg_of(kc, namespace, "theirs")["spec"]["minMember"] == 3  # untouched
    events = {e["reason"]: e for e in kc.list(EVENTS, namespace)[0]}
    assert events["InvalidElasticPolicy"]["type"] == "Warning"
    assert "greater than maxReplicas" in events["InvalidElasticPolicy"]["message"]


def test_finished_job_loses_podgroup_and_gated_pods(kc: KubeClient, cluster: Cluster, controller: Running) -> None:
    ns = cluster.ns
    kc.create(PYTORCHJOBS, job(ns, "a", workers=4, min_r=2, max_r=4), ns)
    wait_until("PodGroup", lambda: pg_of(kc, ns, "a"))
    n = cluster.node()
    cluster.add([o for o in support.elastic_job(ns, "a", n, min_r=2, max_r=4, running=2) if o["kind"] == "Pod"])
    kc.patch(PYTORCHJOBS, "a", {"status": {"conditions": [{"type": "Succeeded", "status": "True",
                                                            "reason": "Done", "message": "done"}]}}, ns,
             subresource="status")
    wait_until("PodGroup deleted", lambda: pg_of(kc, ns, "a") is None)
    wait_until("gated pods gone", lambda: {p["metadata"]["name"] for p in kc.list(PODS, ns)[0]
                                           if not p["metadata"].get("deletionTimestamp")} == {"a-worker-0",
                                                                                               "a-worker-1"})
    assert "GatedPodsCleanedUp" in reasons(kc, ns)


def test_podgroups_survive_an_api_server_restart(kc: KubeClient, namespace: str, controller: Running,
                                                 box: Any) -> None:
    kc.create(PYTORCHJOBS, job(namespace, "before", workers=4, min_r=2, max_r=4), namespace)
    wait_until("PodGroup", lambda: pg_of(kc, namespace, "before"))
    restarts = sum(controller.caches.restarts().values())
    proc = box.procs["kube-apiserver"]
    argv = list(proc.argv)
    box.stop("kube-apiserver")
    time.sleep(2)
    box.spawn("kube-apiserver", argv)
    wait_until("apiserver back", lambda: _ready(kc, namespace), timeout=90, interval=0.5)
    # Changes made right away, before the caches have necessarily reconnected, must not be lost.
    kc.create(PYTORCHJOBS, job(namespace, "after", workers=4, min_r=2, max_r=4), namespace)
    kc.patch(PYTORCHJOBS, "before", {"spec": {"elasticPolicy": {"minReplicas": 3}}}, namespace)
    wait_until("PodGroup of the new job", lambda: pg_of(kc, namespace, "after"), timeout=60)
    wait_until("PodGroup of the changed job",
               lambda: (pg_of(kc, namespace, "before") or {}).get("spec", {}).get("minMember") == 3, timeout=60)
    assert sum(controller.caches.restarts().values()) > restarts


def _ready(kc: KubeClient, ns: str) -> bool:
    try:
        kc.list(PYTORCHJOBS, ns)
        kc.list(PODGROUPS, ns)
        return True
    except Exception:
        return False


def _start(box_process: Any, kubeconfig: str, ns: str, ident: str) -> Any:
    return box_process(ident, [sys.executable, "-m", "elastic_controller", "controller",
                               "--kubeconfig", kubeconfig, "--lease-namespace", ns, "--lease-name", "ve",
                               "--identity", ident, "--lease-duration", "4", "--renew-deadline", "3",
                               "--retry-period", "1", "--http-port", "0"])


def _holder(kc: KubeClient, ns: str) -> str:
    try:
        return str(kc.get(LEASES, "ve", ns)["spec"].get("holderIdentity") or "")
    except NotFoundError:
        return ""


def test_two_replicas_one_leads_and_the_other_takes_over(kc: KubeClient, namespace: str, box_process: Any,
                                                         kubeconfig: str) -> None:
    a = _start(box_process, kubeconfig, namespace, "replica-a")
    wait_until("replica-a leads", lambda: _holder(kc, namespace) == "replica-a", timeout=30)
    b_ = _start(box_process, kubeconfig, namespace, "replica-b")
    kc.create(PYTORCHJOBS, job(namespace, "j1", workers=4, min_r=2, max_r=4), namespace)
    wait_until("PodGroup by the leader", lambda: pg_of(kc, namespace, "j1"), timeout=30)
    time.sleep(2)
    assert _holder(kc, namespace) == "replica-a"
    assert "leading" not in Path(b_.log).read_text()
    os.killpg(a.pid, signal.SIGKILL)  # no lease release: the follower must wait the lease out
    t0 = time.monotonic()
    wait_until("replica-b leads", lambda: _holder(kc, namespace) == "replica-b", timeout=20, interval=0.1)
    took = time.monotonic() - t0
    assert took < 4 + 2 + 1, took  # lease duration + retry period + slack
    kc.create(PYTORCHJOBS, job(namespace, "j2", workers=4, min_r=2, max_r=4), namespace)
    wait_until("PodGroup by the new leader", lambda: pg_of(kc, namespace, "j2"), timeout=30)
    # Graceful shutdown releases the lease at once.
    c = _start(box_process, kubeconfig, namespace, "replica-c")
    time.sleep(2)
    os.killpg(b_.pid, signal.SIGTERM)
    t0 = time.monotonic()
    wait_until("replica-c leads", lambda: _holder(kc, namespace) == "replica-c", timeout=20, interval=0.1)
    assert time.monotonic() - t0 < 3.5
    assert c.pid


def test_metrics_and_health_endpoints(kc: KubeClient, namespace: str, box_process: Any, kubeconfig: str) -> None:
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    box_process("metrics", [sys.executable, "-m", "elastic_controller", "controller", "--kubeconfig", kubeconfig,
                            "--lease-namespace", namespace, "--http-port", str(port), "--http-address",
                            "127.0.0.1"])

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except Exception as exc:
            return 0, str(exc)

    wait_until("ready", lambda: get("/readyz")[0] == 200, timeout=30)
    assert get("/healthz")[0] == 200
    wait_until("leading", lambda: "volcano_elastic_leader 1.0" in get("/metrics")[1], timeout=30)
    text = get("/metrics")[1]
    for name in ("volcano_elastic_agent_cycle_seconds", "volcano_elastic_watch_restarts_total",
                 "volcano_elastic_evictions_total", "volcano_elastic_gate_releases_total"):
        assert name in text


def test_status_and_release_gates_commands(kc: KubeClient, cluster: Cluster, kubeconfig: str) -> None:
    import subprocess

    ns = cluster.ns
    n = cluster.node()
    objs = support.elastic_job(ns, "j", n, min_r=2, max_r=4, running=2)
    for o in objs:
        if o["metadata"]["name"] == "j-worker-3":
            o["spec"]["schedulingGates"].insert(0, {"name": "example.com/other"})
    cluster.add(objs)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "elastic_controller", *args, "--kubeconfig", kubeconfig],
                              capture_output=True, text=True, timeout=60, check=False)

    status = cli("status", "-n", ns)
    assert status.returncode == 0, status.stderr
    assert f"{ns}/j" in status.stdout and "QUEUE default" in status.stdout
    row = next(line for line in status.stdout.splitlines() if f"{ns}/j" in line).split()
    assert row[1:4] == ["2", "2", "4"] and row[7] == "2"  # min cur max ... gated (after ELASTIC, COOLDOWN, RESTARTS)
    out = cli("release-gates", f"{ns}/j")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("lifted") == 2
    assert not cluster.pod("j-worker-2")["spec"].get("schedulingGates")
    assert cluster.pod("j-worker-3")["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
    assert "no pod carries" in cli("release-gates", "--all", "-n", ns).stdout
