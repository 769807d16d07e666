"""The job contract's annotations (issue 20) copied to the PodGroup on a real kube-apiserver."""

from __future__ import annotations

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import EVENTS, PODGROUPS, PYTORCHJOBS
from elastic_controller.policy import keys
from elastic_controller.policy.parse import parse_podgroup
from elastic_controller.policy.worldsizes import WorkerSizes
from tests.harness import agentbox as support
from tests.harness import controllerbox as controller_tests
from tests.harness.agentbox import wait_until
from tests.harness.controllerbox import Running, job, pg_of

pytestmark = pytest.mark.integration
kc, controller = support.kc, controller_tests.controller  # fixtures


def contract_of(kc: KubeClient, ns: str) -> dict[str, str] | None:
    pg = pg_of(kc, ns, "j")
    if pg is None:
        return None
    ann = pg["metadata"].get("annotations") or {}
    return {k: v for k, v in ann.items() if k in keys.COPIED_TO_PODGROUP}


def test_contract_is_copied_switched_and_removed(kc: KubeClient, namespace: str, controller: Running) -> None:
    obj = job(namespace, "j", workers=8, min_r=2, max_r=8)
    obj["metadata"]["annotations"] = {keys.WORKER_COUNTS: "2,4,8", "other.io/x": "y"}
    kc.create(PYTORCHJOBS, obj, namespace)
    wait_until("contract copied", lambda: contract_of(kc, namespace) == {keys.WORKER_COUNTS: "2,4,8"})
    pg = pg_of(kc, namespace, "j")
    assert pg is not None and "other.io/x" not in (pg["metadata"].get("annotations") or {})
    assert parse_podgroup(pg).worker_sizes == WorkerSizes(counts=(2, 4, 8))
    # the agent's annotations and Volcano's live next to the copy and survive every change of it
    kc.patch(PODGROUPS, "j", {"metadata": {"annotations": {keys.LAST_SCALE_TIME: "2026-01-01T00:00:00Z",
                                                           "scheduling.volcano.sh/x": "1"}}}, namespace)
    kc.patch(PYTORCHJOBS, "j", {"metadata": {"annotations": {keys.WORKER_COUNTS: None,
                                                             keys.WORKER_STEP: "2"}}}, namespace)
    wait_until("switched to a step", lambda: contract_of(kc, namespace) == {keys.WORKER_STEP: "2"})
    kc.patch(PYTORCHJOBS, "j", {"metadata": {"annotations": {keys.WORKER_STEP: None}}}, namespace)
    wait_until("contract removed", lambda: contract_of(kc, namespace) == {})
    pg = pg_of(kc, namespace, "j")
    assert pg is not None
    assert pg["metadata"]["annotations"][keys.LAST_SCALE_TIME] == "2026-01-01T00:00:00Z"
    assert pg["metadata"]["annotations"]["scheduling.volcano.sh/x"] == "1"
    assert {m["manager"] for m in pg["metadata"]["managedFields"]} >= {"volcano-elastic"}


def test_contract_admitted_without_the_webhook_gets_a_warning(kc: KubeClient, namespace: str,
                                                              controller: Running) -> None:
    obj = job(namespace, "j", workers=8, min_r=2, max_r=8)
    obj["metadata"]["annotations"] = {keys.WORKER_COUNTS: "4,8"}  # no webhook in this tier: nothing denies it
    kc.create(PYTORCHJOBS, obj, namespace)
    wait_until("copied as written", lambda: contract_of(kc, namespace) == {keys.WORKER_COUNTS: "4,8"})
    events = wait_until("warning", lambda: [e for e in kc.list(EVENTS, namespace)[0]
                                            if e["reason"] == "InvalidJobContract"])
    assert events[0]["type"] == "Warning" and "does not include minReplicas (2)" in events[0]["message"]
