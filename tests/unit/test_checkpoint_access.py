"""The controller grants an elastic job's ServiceAccount patch on exactly its own pods (issue 29),
against the in-memory API. The grant itself (403 for other pods) is checked on a real API server in
tests/integration/test_checkpoint_access.py."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.checkpoint_access import pod_names, service_accounts, wanted
from elastic_controller.controller import Controller
from elastic_controller.kube.errors import ForbiddenError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore, raise_on
from elastic_controller.kube.resources import PODGROUPS, PYTORCHJOBS, QUEUES, ROLEBINDINGS, ROLES
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b


def job(*, sa: str | None = "trainer", workers: int = 4, min_r: int = 2, max_r: int = 4, master: bool = False,
        elastic: bool = True) -> dict[str, Any]:
    j = b.pytorchjob("ns", "j", workers=workers, min_r=min_r, max_r=max_r, master=master, elastic=elastic)
    if sa is not None:
        for rspec in j["spec"]["pytorchReplicaSpecs"].values():
            rspec["template"]["spec"]["serviceAccountName"] = sa
    return j


def make(*jobs: dict[str, Any]) -> tuple[FakeKube, Controller]:
    kube = FakeKube()
    kube.add(QUEUES, b.queue("default"))
    for j in jobs:
        kube.add(PYTORCHJOBS, j)
    return kube, Controller(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube))


def rbac_calls(kube: FakeKube) -> list[tuple[str, str]]:
    return [(c[0], c[1]) for c in kube.calls if c[1] in ("roles", "rolebindings")]


def test_the_role_names_exactly_the_jobs_pods_and_binds_its_service_account() -> None:
    kube, ctl = make(job())
    assert ctl.reconcile("ns/j").action == "created"
    role = kube.get(ROLES, "j-volcano-elastic-checkpoint", "ns")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"],
                              "resourceNames": ["j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3"]}]
    binding = kube.get(ROLEBINDINGS, "j-volcano-elastic-checkpoint", "ns")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "trainer", "namespace": "ns"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "j-volcano-elastic-checkpoint"}
    for obj in (role, binding):
        assert obj["metadata"]["ownerReferences"] == [
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j", "uid": "uid-job-ns-j"}]
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "volcano-elastic"}


def test_a_reconcile_that_changes_nothing_makes_no_rbac_call() -> None:
    kube, ctl = make(job())
    ctl.reconcile("ns/j")
    first = rbac_calls(kube)
    assert first == [("patch-merge", "roles"), ("create", "roles"),
                     ("patch-merge", "rolebindings"), ("create", "rolebindings")]
    ctl.reconcile("ns/j")
    ctl.reconcile("ns/j")
    assert rbac_calls(kube) == first


def test_a_new_max_is_followed_and_a_restarted_controller_patches_in_place() -> None:
    kube, ctl = make(job())
    ctl.reconcile("ns/j")
    grown = job(workers=6, max_r=6)
    kube.add(PYTORCHJOBS, grown)
    ctl.reconcile("ns/j")
    role = kube.get(ROLES, "j-volcano-elastic-checkpoint", "ns")
    assert role["rules"][0]["resourceNames"] == [f"j-worker-{i}" for i in range(6)]
    kube.calls.clear()
    ctl2 = Controller(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube))
    ctl2.reconcile("ns/j")  # a new process knows nothing: one merge patch each, no create
    assert rbac_calls(kube) == [("patch-merge", "roles"), ("patch-merge", "rolebindings")]


@pytest.mark.parametrize("case", ["default-sa", "no-sa", "not-elastic", "static-bounds"])
def test_no_grant_without_a_service_account_of_its_own_or_without_elastic_workers(case: str) -> None:
    j = {"default-sa": job(sa="default"), "no-sa": job(sa=None), "not-elastic": job(elastic=False),
         "static-bounds": job(min_r=4, max_r=4)}[case]
    kube, ctl = make(j)
    assert ctl.reconcile("ns/j").action == "created"
    assert rbac_calls(kube) == []
    assert kube.of(ROLES) == []


def test_a_refused_grant_never_holds_back_the_podgroup_and_is_not_retried_every_reconcile(
        caplog: pytest.LogCaptureFixture) -> None:
    kube, ctl = make(job())
    kube.faults.append(raise_on("patch-merge", "roles", error=ForbiddenError("roles is forbidden", 403), times=5))
    assert ctl.reconcile("ns/j").action == "created"
    assert kube.of(PODGROUPS)
    assert "record_checkpoint() will get 403" in caplog.text
    n = len(rbac_calls(kube))
    ctl.reconcile("ns/j")
    assert len(rbac_calls(kube)) == n


def test_a_transient_error_is_retried_at_the_next_reconcile() -> None:
    kube, ctl = make(job())
    kube.faults.append(raise_on("patch-merge", "rolebindings", times=1))  # a 500
    assert ctl.reconcile("ns/j").action == "created"
    assert kube.of(ROLEBINDINGS) == []
    ctl.reconcile("ns/j")
    assert kube.get(ROLEBINDINGS, "j-volcano-elastic-checkpoint", "ns")["subjects"][0]["name"] == "trainer"


def test_master_and_workers_and_two_accounts() -> None:
    j = job(master=True)
    j["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["serviceAccountName"] = "lead"
    assert pod_names(j) == ["j-master-0", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3"]
    assert service_accounts(j) == ["lead", "trainer"]
    want = wanted(j)
    assert want is not None
    assert [s["name"] for s in want[1]["subjects"]] == ["lead", "trainer"]
