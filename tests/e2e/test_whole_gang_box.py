"""``wholeGangUpTo`` on the whole box (real Volcano scheduler, kwok GPU nodes 4 x 8, the training
operator, our webhook, controller and agent; issue 38): in a queue whose ``wholeGangUpTo`` is 4, an
elastic job of 1..4 workers (and a Master) gets a PodGroup of minMember 5 (the master and its max) and
runs whole, none of its workers left behind the scale-up gate; a job of 2..8 workers in the same queue
(above the key) gets minMember 3 and its workers beyond its min gated, as before.

The key is set for that queue only, so the webhook cannot know it (a pod does not say its job's
queue): it gates the small job's workers beyond its min like any elastic worker's, and the controller
lifts those gates once it has written the PodGroup (``Controller._ungate_gang``). A watch on the pods
sees both: each pod as the webhook made it (ADDED), then the gate gone (MODIFIED). With the key in
``defaults`` (the same for every queue) the webhook knows, and the gang's workers are never gated."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS, QUEUES
from elastic_controller.policy import keys
from tests.harness import stack
from tests.harness.legacy import LEGACY_FLOW
from tests.harness.stack import WEBHOOKS, delete_quietly, pytorchjob, start_stack, wait_until

kc = stack.kc  # a fixture
pytestmark = pytest.mark.e2e

GATE = keys.DEFAULT_GATE


def _gates(pod: dict[str, Any]) -> list[str]:
    return [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]


def _watch_gates(client: KubeClient, ns: str, seen: dict[str, list[list[str]]], stop: threading.Event) -> None:
    """Every state of the gates of every pod of ``ns``, per pod name, in order (the first: at creation)."""
    _, rv = client.list(PODS, ns)
    try:
        for event in client.watch(PODS, rv, ns, timeout_seconds=110):
            obj = event.get("object") or {}
            name = (obj.get("metadata") or {}).get("name")
            if name and event.get("type") in ("ADDED", "MODIFIED"):
                states = seen.setdefault(name, [])
                if not states or states[-1] != _gates(obj):
                    states.append(_gates(obj))
            if stop.is_set():
                return
    except KubeError:  # the stream ends with the test (its namespace, the box): what was seen stays
        return


def _running(client: KubeClient, ns: str, job: str) -> list[dict[str, Any]]:
    pods = client.list(PODS, ns, label_selector=f"training.kubeflow.org/job-name={job}")[0]
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


@pytest.mark.parametrize("where", ["queue", "defaults"])
def test_small_job_runs_whole_and_a_big_one_as_before(kc: KubeClient, box: Any, box_process: Any,
                                                      kubeconfig: str, namespace: str,
                                                      serving_cert: tuple[Path, Path], tmp_path: Path,
                                                      where: str) -> None:
    """``where`` the key is set: for the job's queue only (the webhook gates, the controller lifts), or
    in ``defaults`` (every queue the same: the webhook leaves the gang's workers ungated)."""
    queue = f"whole-{uuid.uuid4().hex[:5]}"
    cfg = tmp_path / "config.yaml"
    # every other queue at 0 (as before issue 38's defaults) for "queue"; the other two keys as before
    key = (f"defaults: {{{LEGACY_FLOW}}}\nqueues: {{{queue}: {{wholeGangUpTo: 4}}}}" if where == "queue"
           else "defaults: {wholeGangUpTo: 4, elasticMinShare: 1, noticeSeconds: 0}")
    cfg.write_text(f"agent: {{intervalSeconds: 1}}\n{key}\n")
    hook = start_stack(kc, box, box_process, kubeconfig, cfg, serving_cert, namespace)
    kc.create(QUEUES, {"metadata": {"name": queue}, "spec": {"weight": 1, "reclaimable": True}})
    seen: dict[str, list[list[str]]] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_gates, args=(kc, namespace, seen, stop), daemon=True)
    try:
        wait_until(f"queue {queue} Open",
                   lambda: (kc.get(QUEUES, queue).get("status") or {}).get("state") == "Open", 60)
        watcher.start()
        # small: 1 master + 4 workers of 4 GPUs = 20 of the box's 32 GPUs; big's min set (1 + 2) the other 12
        kc.create(PYTORCHJOBS, pytorchjob("small", queue, 4, (1, 4), master=True), namespace)
        wait_until("small runs whole (master + 4 workers)", lambda: len(_running(kc, namespace, "small")) >= 5, 90)
        pg = kc.get(PODGROUPS, "small", namespace)["spec"]
        assert pg["minMember"] == 5 and pg["minTaskMember"] == {"master": 1, "worker": 4}, pg
        assert pg["minResources"]["nvidia.com/gpu"] == "20", pg
        kc.create(PYTORCHJOBS, pytorchjob("big", queue, 8, (2, 8), master=True), namespace)
        wait_until("big runs its min set (master + 2 workers)", lambda: len(_running(kc, namespace, "big")) >= 3, 60)
        big = kc.get(PODGROUPS, "big", namespace)["spec"]
        assert big["minMember"] == 3 and big["minTaskMember"] == {"master": 1, "worker": 2}, big
        # the operator makes big's 9 pods one after another: all of them before judging their gates
        wait_until("big's 9 pods exist", lambda: len(kc.list(
            PODS, namespace, label_selector="training.kubeflow.org/job-name=big")[0]) == 9, 60)
        stop.set()
        small_pods = kc.list(PODS, namespace, label_selector="training.kubeflow.org/job-name=small")[0]
        assert all(GATE not in _gates(p) for p in small_pods)
        big_pods = {p["metadata"]["name"]: p for p in
                    kc.list(PODS, namespace, label_selector="training.kubeflow.org/job-name=big")[0]}
        # above the key: its elastic workers wait at the gate (no room is left for them), as before
        assert sorted(n for n, p in big_pods.items() if GATE in _gates(p)) == [f"big-worker-{i}" for i in range(2, 8)]
        # key of the queue: the webhook gated small's workers beyond its min (it cannot know the
        # queue's key) and the controller lifted them: each seen gated at creation, then not. Key in
        # defaults: the webhook gated none of them.
        for i in range(4):
            states = seen.get(f"small-worker-{i}")
            assert states, sorted(seen)
            gated_at_creation = where == "queue" and i >= 1
            assert states[0] == ([GATE] if gated_at_creation else []) and states[-1] == [], (i, states)
            assert len(states) == (2 if gated_at_creation else 1), (i, states)
        assert len(_running(kc, namespace, "small")) == 5  # none of its workers went for big
    finally:
        stop.set()
        delete_quietly(kc, namespace, ("small", "big"), ((hook, WEBHOOKS), (queue, QUEUES)))
