"""The admin's install, for real: `helm install` of charts/volcano-elastic (then `kubectl apply -k
manifests/overlays/kind`) on the box with real nodes, from our image built here. The certgen Job
writes the serving certificate, two webhook replicas serve behind their Service (the API server
calls them through it), the controller holds its Lease, and the e2e smoke story runs on real
pods: job A (elastic) fills the GPUs, gang B arrives in another queue, our in-cluster agent evicts
A's elastic workers through the Eviction API (each gets SIGTERM and its grace period), B runs and
finishes, A grows back after its cooldown. `helm uninstall` leaves no gate and no finalizer."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.harness import realstack
from tests.harness.realstack import (
    COOLDOWN,
    GATE,
    GPUS_PER_WORKER,
    KF,
    PROBE,
    VC,
    create_queues,
    delete_queues,
    pytorchjob,
    records,
    running,
    wait_installed,
    worker_pods,
)
from tests.harness.waiting import wait_until

out_dir = realstack.out_dir  # a fixture

ROOT = Path(__file__).resolve().parents[2]


def smoke_story(box: Any, core: Any, objs: Any, ns: str, out_dir: Path) -> dict[str, float]:
    """A fills the GPUs, B needs room, our in-cluster agent makes it, A regrows; returns timings."""
    tag = uuid.uuid4().hex[:5]
    qa, qb = f"dept-a-{tag}", f"dept-b-{tag}"
    create_queues(objs, qa, qb)
    gpus = box.opts.real_nodes * box.opts.real_node_gpus
    max_a = gpus // GPUS_PER_WORKER
    try:
        objs.create_namespaced_custom_object(*KF, ns, "pytorchjobs", pytorchjob(
            "a", qa, max_a, (2, max_a), out_dir, ["python3", "-c", PROBE]))
        wait_until(f"A runs {max_a} workers", lambda: len(running(core, ns, "a")) >= max_a, 180, interval=1)
        a0 = {p.metadata.name: p.metadata.uid for p in running(core, ns, "a")}
        roles = {p.metadata.name: (p.metadata.annotations or {}).get("volcano-elastic.io/role") for p in
                 worker_pods(core, ns, "a")}
        assert "elastic" in roles.values(), roles  # our webhook, called through its Service, labelled them

        t_b = time.monotonic()
        objs.create_namespaced_custom_object(*KF, ns, "pytorchjobs", pytorchjob(
            "b", qb, 2, None, out_dir, ["python3", "-c", "import time; time.sleep(20)"]))
        wait_until("B runs both workers", lambda: len(running(core, ns, "b")) >= 2, 180, interval=0.5)
        b_running = time.monotonic() - t_b
        gone = [n for n, uid in a0.items() if uid not in {p.metadata.uid for p in worker_pods(core, ns, "a")}]
        assert gone, "B ran without any A worker leaving"
        assert "a-worker-0" not in gone  # the master is never a victim
        assert len(running(core, ns, "a")) >= 2  # never below min
        for name in gone:  # each victim got SIGTERM and finished its handler within the grace period
            rec = wait_until(f"{name} recorded SIGTERM and its exit",
                             lambda name=name: (r := records(out_dir, name)).get("exit") and r, 30)
            assert rec["exit"]["t"] - rec["term"]["t"] >= 1.8
        def pg() -> dict[str, str]:
            try:
                return dict(objs.get_namespaced_custom_object(*VC, ns, "podgroups", "a")["metadata"]
                            .get("annotations") or {})
            except client.ApiException as e:
                job = objs.get_namespaced_custom_object(*KF, ns, "pytorchjobs", "a")
                raise AssertionError(f"A's PodGroup: {e.status}; A: {json.dumps(job.get('status'))}; "
                                     f"pods: {[(p.metadata.name, p.status.phase) for p in worker_pods(core, ns, 'a')]}"
                                     ) from None

        down = pg()
        assert down.get("volcano-elastic.io/last-scale-direction") == "down", down
        events = [e for e in core.list_namespaced_event(ns).items if e.reason == "EvictedForGang"]
        assert sorted(e.involved_object.name for e in events) == sorted(gone)
        t_regrow = time.monotonic()
        wait_until(f"A grows back to {max_a} after B and the cooldown",
                   lambda: len(running(core, ns, "a")) >= max_a, COOLDOWN + 150, interval=1)
        up = pg()
        assert up.get("volcano-elastic.io/last-scale-direction") == "up", up
        from elastic_controller.policy.parse import parse_time

        t_down = parse_time(down["volcano-elastic.io/last-scale-time"])
        t_up = parse_time(up["volcano-elastic.io/last-scale-time"])
        assert t_down and t_up and (t_up - t_down).total_seconds() >= COOLDOWN - 1  # the cooldown held
        return {"b_running_s": round(b_running, 1), "a_regrow_s": round(time.monotonic() - t_regrow, 1),
                "victims": float(len(gone))}
    finally:
        for job in ("a", "b"):
            try:
                objs.delete_namespaced_custom_object(*KF, ns, "pytorchjobs", job)
            except client.ApiException:
                pass
        delete_queues(objs, qa, qb)


def no_gates_or_finalizers_left(core: Any) -> None:
    pods = core.list_pod_for_all_namespaces().items
    gated = [p.metadata.name for p in pods if GATE in [g.name for g in p.spec.scheduling_gates or []]]
    assert not gated, f"pods left gated after uninstall: {gated}"
    held = [p.metadata.name for p in pods if any("volcano-elastic" in f for f in p.metadata.finalizers or [])]
    assert not held, f"pods with our finalizers after uninstall: {held}"


def test_helm_install_runs_in_the_cluster_and_shrinks_a_real_job_for_a_gang(
        box: Any, kube: Any, namespace: str, out_dir: Path) -> None:
    core, objs = kube(client.CoreV1Api), kube(client.CustomObjectsApi)
    installed_in = realstack.install(box)
    try:
        timings = smoke_story(box, core, objs, namespace, out_dir)
        print(f"\n[real] helm install ready in {installed_in:.1f}s; story: {json.dumps(timings)}")
    finally:
        realstack.uninstall(box)
    no_gates_or_finalizers_left(core)


def test_kustomize_overlay_installs_and_its_webhook_mutates_through_the_service(
        box: Any, kube: Any, namespace: str) -> None:
    core = kube(client.CoreV1Api)
    realstack.create_namespace(box)
    overlay = ROOT / "manifests" / "overlays" / "kind"
    applied = box.kubectl("apply", "-k", str(overlay), check=False, timeout=120)
    assert applied.returncode == 0, applied.stderr
    try:
        wait_installed(box, core)
        objs = kube(client.CustomObjectsApi)
        job = pytorchjob("k", "default", 2, (1, 2), Path("/tmp"), ["python3", "-c", "import time; time.sleep(600)"])
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"] = []
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["volumeMounts"] = []
        objs.create_namespaced_custom_object(*KF, namespace, "pytorchjobs", job)
        pods = wait_until("the job's pods", lambda: len(worker_pods(core, namespace, "k")) == 2 and
                          worker_pods(core, namespace, "k"), 60)
        ann = {p.metadata.name: (p.metadata.annotations or {}) for p in pods}
        assert all(a.get("scheduling.k8s.io/group-name") == "k" for a in ann.values()), ann
        assert {a.get("volcano-elastic.io/role") for a in ann.values()} >= {"master"}
    finally:
        deleted = box.kubectl("delete", "-k", str(overlay), "--wait=true", "--ignore-not-found", check=False,
                              timeout=180)
        assert deleted.returncode == 0, deleted.stderr
