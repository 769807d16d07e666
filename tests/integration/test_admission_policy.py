"""The ValidatingAdmissionPolicy that bounds the controller's `patch pods` / `patch pytorchjobs`
(issue 23, least privilege), exercised on a real kube-apiserver with a real token of the
controller's ServiceAccount: our gate may be removed and our annotations written; an image, a
label, a foreign annotation, another gate or a job's spec may not be changed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS
from tests.harness import builders as b
from tests.harness.appliedbox import installed, sa_kubeconfig  # noqa: F401 - fixture
from tests.harness.manifests import SA_CONTROLLER

pytestmark = pytest.mark.integration
GATE = "volcano-elastic.io/scale-up"


def _pod(ns: str) -> dict[str, Any]:
    p = b.pod(ns, "w", group="j", gates=[GATE, "example.com/other"])
    for k in ("resourceVersion", "uid", "creationTimestamp"):
        p["metadata"].pop(k, None)
    p["metadata"]["annotations"] = {"example.com/keep": "1"}
    p.pop("status", None)
    p["spec"].pop("nodeName", None)
    return p


def denied(fn: Any) -> KubeError:
    with pytest.raises(KubeError) as info:
        fn()
    assert info.value.status in (403, 422), info.value
    return info.value


def _wait_enforced(sa: KubeClient, admin: KubeClient, namespace: str) -> None:
    """The API server loads a policy asynchronously: wait for its first denial of a label change."""
    deadline = time.monotonic() + 30
    while True:
        try:
            sa.patch(PODS, "w", {"metadata": {"labels": {"x": "y"}}}, namespace)
        except KubeError as exc:
            assert exc.status in (403, 422), exc
            return
        admin.patch(PODS, "w", {"metadata": {"labels": {"x": None}}}, namespace)
        assert time.monotonic() < deadline, "the admission policy never denied a label change"
        time.sleep(0.5)


def test_the_controller_token_may_only_lift_our_gate_and_write_our_annotations(
        box: Any, installed: list[dict[str, Any]], namespace: str, tmp_path: Path) -> None:  # noqa: F811
    admin = KubeClient.from_kubeconfig(str(box.kubeconfig))
    sa = KubeClient.from_kubeconfig(str(sa_kubeconfig(box, SA_CONTROLLER, tmp_path / "sa.kubeconfig")))
    try:
        admin.create(PODS, _pod(namespace), namespace)
        _wait_enforced(sa, admin, namespace)

        # allowed: our annotations (add, change, remove) and removing our gate
        sa.patch(PODS, "w", {"metadata": {"annotations": {"volcano-elastic.io/evicted-for": "ns/g"}}}, namespace)
        sa.patch(PODS, "w", {"metadata": {"annotations": {"volcano-elastic.io/evicted-for": None}}}, namespace)
        out = sa.patch(PODS, "w", {"spec": {"schedulingGates": [{"$patch": "delete", "name": GATE}]}}, namespace,
                       patch_type="strategic")
        assert [g["name"] for g in out["spec"]["schedulingGates"]] == ["example.com/other"]

        # denied: an image, a foreign annotation, another gate, tolerations
        err = denied(lambda: sa.patch(PODS, "w", {"spec": {"containers": [
            {"name": "pytorch", "image": "evil:latest"}]}}, namespace, patch_type="strategic"))
        assert "volcano-elastic" in str(err)
        denied(lambda: sa.patch(PODS, "w", {"metadata": {"annotations": {"example.com/keep": "2"}}}, namespace))
        denied(lambda: sa.patch(PODS, "w", {"metadata": {"annotations": {"example.com/keep": None}}}, namespace))
        denied(lambda: sa.patch(PODS, "w", {"spec": {"schedulingGates": [
            {"$patch": "delete", "name": "example.com/other"}]}}, namespace, patch_type="strategic"))
        denied(lambda: sa.patch(PODS, "w", {"spec": {"tolerations": [
            {"key": "x", "operator": "Exists"}]}}, namespace))
        pod = admin.get(PODS, "w", namespace)
        assert pod["spec"]["containers"][0]["image"] != "evil:latest"
        assert pod["metadata"]["annotations"]["example.com/keep"] == "1"

        # the admin is not bound by it
        admin.patch(PODS, "w", {"spec": {"containers": [{"name": "pytorch", "image": "other:1"}]}}, namespace,
                    patch_type="strategic")

        # PyTorchJobs: our cooldown copy yes, anything else no
        job = b.pytorchjob(namespace, "j", workers=2, min_r=1, max_r=2)
        for k in ("uid", "creationTimestamp"):
            job["metadata"].pop(k, None)
        admin.create(PYTORCHJOBS, job, namespace)
        sa.patch(PYTORCHJOBS, "j", {"metadata": {"annotations": {
            "volcano-elastic.io/last-scale-time": "2026-01-01T00:00:00Z"}}}, namespace)
        denied(lambda: sa.patch(PYTORCHJOBS, "j", {"spec": {"elasticPolicy": {"maxReplicas": 9}}}, namespace))
        denied(lambda: sa.patch(PYTORCHJOBS, "j", {"metadata": {"annotations": {"other.io/x": "1"}}}, namespace))
    finally:
        sa.close()
        admin.close()


def test_the_controller_token_may_not_steer_a_gated_pod(
        box: Any, installed: list[dict[str, Any]], namespace: str, tmp_path: Path) -> None:  # noqa: F811
    """Issue 31 item 6: nodeSelector, affinity and tolerations are mutable on a gated pod (Kubernetes'
    mutable scheduling directives); with our token a merge PATCH of them returned 200, on a pod gated
    by us and on one gated by another system. Only removing our gate (alone) is ours to do."""
    admin = KubeClient.from_kubeconfig(str(box.kubeconfig))
    sa = KubeClient.from_kubeconfig(str(sa_kubeconfig(box, SA_CONTROLLER, tmp_path / "sa.kubeconfig")))
    try:
        admin.create(PODS, _pod(namespace), namespace)  # gated by us and by another system
        foreign = _pod(namespace)
        foreign["metadata"]["name"] = "f"
        foreign["spec"]["schedulingGates"] = [{"name": "example.com/other"}]
        admin.create(PODS, foreign, namespace)
        _wait_enforced(sa, admin, namespace)
        before = {name: admin.get(PODS, name, namespace)["spec"] for name in ("w", "f")}
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
        for name in ("w", "f"):
            denied(lambda n=name: sa.patch(PODS, n, {"spec": {"nodeSelector": {"zone": "a"}}}, namespace))
            denied(lambda n=name: sa.patch(PODS, n, {"spec": {"affinity": affinity}}, namespace))
            denied(lambda n=name: sa.patch(PODS, n, {"spec": {"tolerations": [
                {"key": "x", "operator": "Exists"}]}}, namespace))
        # our gate's removal carries nothing else along
        denied(lambda: sa.patch(PODS, "w", {"spec": {"nodeSelector": {"zone": "a"}, "schedulingGates": [
            {"name": "example.com/other"}]}}, namespace))
        for name in ("w", "f"):
            spec = admin.get(PODS, name, namespace)["spec"]
            assert spec == before[name] and "nodeSelector" not in spec and "affinity" not in spec
        # the admin may (Kubernetes allows it while gated), and our gate alone still may go
        admin.patch(PODS, "w", {"spec": {"nodeSelector": {"zone": "a"}}}, namespace)
        out = sa.patch(PODS, "w", {"spec": {"schedulingGates": [{"$patch": "delete", "name": GATE}]}}, namespace,
                       patch_type="strategic")
        assert [g["name"] for g in out["spec"]["schedulingGates"]] == ["example.com/other"]
        assert out["spec"]["nodeSelector"] == {"zone": "a"}
    finally:
        sa.close()
        admin.close()


def test_the_controller_token_deletes_only_its_own_podgroups(
        box: Any, installed: list[dict[str, Any]], namespace: str, tmp_path: Path) -> None:  # noqa: F811
    """Issue 31 item 6: the account could delete any PodGroup in any namespace; now only those it
    manages (app.kubernetes.io/managed-by=volcano-elastic, as the controller creates them)."""
    admin = KubeClient.from_kubeconfig(str(box.kubeconfig))
    sa = KubeClient.from_kubeconfig(str(sa_kubeconfig(box, SA_CONTROLLER, tmp_path / "sa.kubeconfig")))
    try:
        ours = b.podgroup(namespace, "ours", 1)
        ours["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "volcano-elastic"}
        theirs = b.podgroup(namespace, "theirs", 1)
        theirs["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "someone-else"}
        bare = b.podgroup(namespace, "bare", 1)
        del bare["metadata"]["labels"]
        for pg in (ours, theirs, bare):
            for k in ("resourceVersion", "uid", "creationTimestamp"):
                pg["metadata"].pop(k, None)
            pg.pop("status", None)
            admin.create(PODGROUPS, pg, namespace)
        # enforced once loaded: the first denial of a foreign delete
        deadline = time.monotonic() + 30
        while True:
            try:
                sa.delete(PODGROUPS, "bare", namespace)
            except KubeError as exc:
                assert exc.status in (403, 422), exc
                break
            admin.create(PODGROUPS, bare, namespace)
            assert time.monotonic() < deadline, "the admission policy never denied a foreign PodGroup delete"
            time.sleep(0.5)
        err = denied(lambda: sa.delete(PODGROUPS, "theirs", namespace))
        assert "PodGroups it manages" in str(err)
        assert admin.get(PODGROUPS, "theirs", namespace) and admin.get(PODGROUPS, "bare", namespace)
        # F4 (issue 36): a foreign PodGroup is not ours to change either: not its minMember, queue or
        # priority, nor the label that would make it ours (and then deletable)
        for patch in ({"metadata": {"labels": {"app.kubernetes.io/managed-by": "volcano-elastic"}}},
                      {"spec": {"minMember": 9}}, {"spec": {"queue": "elsewhere"}},
                      {"spec": {"priorityClassName": "system-cluster-critical"}}):
            err = denied(lambda p=patch: sa.patch(PODGROUPS, "theirs", p, namespace))
            assert "PodGroups it manages" in str(err), patch
            denied(lambda p=patch: sa.patch(PODGROUPS, "bare", p, namespace))
        assert admin.get(PODGROUPS, "theirs", namespace)["spec"]["minMember"] == 1
        # ours: its spec and our annotations, but not the label that makes it ours
        sa.patch(PODGROUPS, "ours", {"spec": {"minMember": 2},
                                     "metadata": {"annotations": {"volcano-elastic.io/last-decision": "x"}}}, namespace)
        err = denied(lambda: sa.patch(PODGROUPS, "ours", {"metadata": {"labels": {
            "app.kubernetes.io/managed-by": None}}}, namespace))
        assert "take the app.kubernetes.io/managed-by=volcano-elastic label off" in str(err)
        sa.delete(PODGROUPS, "ours", namespace)
        admin.patch(PODGROUPS, "theirs", {"spec": {"minMember": 3}}, namespace)  # the admin is not bound by it
        admin.delete(PODGROUPS, "theirs", namespace)
    finally:
        sa.close()
        admin.close()
