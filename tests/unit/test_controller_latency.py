"""The PodGroup first (issue 36, item 3: PodGroup latency at 1,000 jobs): a new elastic job's PodGroup
is written before its checkpoint access (Role, RoleBinding) and its pods' ``target-workers``; and new
jobs go ahead of the re-reconciles that pods' changes queue (``WorkQueue.add(urgent=True)``)."""

from __future__ import annotations

from elastic_controller.controller import Controller
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS, ROLEBINDINGS, ROLES
from elastic_controller.kube.workqueue import WorkQueue
from tests.harness import builders as b
from tests.harness.fakecluster import load
from tests.harness.legacy import legacy_config


def controller(*groups: object) -> tuple[FakeKube, Controller]:
    kube = FakeKube()
    load(kube, b.queue("default"), *groups)
    return kube, Controller(kube, FakeStore(kube), legacy_config(), EventRecorder(kube))


def writes(kube: FakeKube) -> list[tuple[str, str]]:
    return [(verb, plural) for verb, plural, _, _, dry in kube.calls if verb != "get" and not dry]


def test_a_new_elastic_jobs_podgroup_is_written_before_its_access_and_sizes() -> None:
    pods = [o for o in b.items(b.elastic_job("ns", "j", min_r=2, max_r=4, nodes=["n1"], running=2))
            if o["kind"] != "PodGroup"]  # a job just created: its pods, no PodGroup yet
    job = b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4)
    for rspec in job["spec"]["pytorchReplicaSpecs"].values():
        rspec.setdefault("template", {}).setdefault("spec", {})["serviceAccountName"] = "trainer"
    kube, ctl = controller(job, pods)
    ctl.build_index()
    assert ctl.reconcile("ns/j").action == "created"
    sent = writes(kube)
    first_pg = sent.index(("create", PODGROUPS.plural))
    others = [i for i, (_, plural) in enumerate(sent) if plural in (ROLES.plural, ROLEBINDINGS.plural, PODS.plural)]
    assert {p for _, p in sent} >= {ROLES.plural, ROLEBINDINGS.plural}, sent  # the access was written too
    assert first_pg < min(others), sent


def test_access_failing_does_not_hold_back_the_podgroup() -> None:
    kube, ctl = controller(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4))
    kube.faults.append(raise_on("patch-merge", ROLES.plural, error=KubeError("rbac down", 500), times=10))
    kube.faults.append(raise_on("create", ROLES.plural, error=KubeError("rbac down", 500), times=10))
    assert ctl.reconcile("ns/j").action == "created"
    assert kube.get(PODGROUPS, "j", "ns")["spec"]["minMember"] == 2


def test_new_jobs_go_ahead_of_re_reconciles() -> None:
    q = WorkQueue()
    for k in ("a", "b", "c"):
        q.add(k)
    q.add("new1", urgent=True)
    q.add("new2", urgent=True)
    q.add("b", urgent=True)  # already waiting: moved up, after the urgent ones before it
    q.add("d")
    got = [q.get(0) for _ in range(6)]
    assert got == ["new1", "new2", "b", "a", "c", "d"]


def test_an_urgent_key_added_while_processed_comes_back_first() -> None:
    q = WorkQueue()
    q.add("job")
    assert q.get(0) == "job"
    q.add("x")
    q.add("job", urgent=True)  # its PodGroup was deleted meanwhile
    q.done("job")
    assert [q.get(0), q.get(0)] == ["job", "x"]


def test_the_controller_queues_a_new_job_urgently() -> None:
    _, ctl = controller()
    for i in range(3):
        labels = {"training.kubeflow.org/job-name": f"old{i}",
                  "training.kubeflow.org/operator-name": "pytorchjob-controller"}
        ctl.on_event(PODS, "ADDED", {"metadata": {"namespace": "ns", "name": f"old-worker-{i}", "labels": labels}})
    ctl.on_event(PYTORCHJOBS, "ADDED", {"metadata": {"namespace": "ns", "name": "fresh"}})
    assert ctl.queue.get(0) == "ns/fresh"
