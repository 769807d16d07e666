"""The watch caches against a real kube-apiserver: a write's answer that comes back after the
watch delivered the object's deletion must not bring the object back (the controller patches
``target-workers`` on the pods of a job whose namespace is being deleted; a resurrected pod held
a node's room in every plan until the next relist, and a job stayed one worker short)."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import PODS
from elastic_controller.policy import keys
from tests.harness import agentbox as support
from tests.harness.waiting import wait_until

kc = support.kc  # fixture

pytestmark = pytest.mark.integration


def test_an_answer_that_loses_the_race_with_a_deletion_does_not_resurrect_the_pod(kc: KubeClient,
                                                                                   namespace: str) -> None:
    pod: dict[str, Any] = {"metadata": {"name": "worker"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    kc.create(PODS, pod, namespace)
    caches = Caches(kc)
    caches.start()
    try:
        assert caches.wait_synced(30), caches.unsynced()
        wait_until("the cache has the pod", lambda: caches.get(PODS, "worker", namespace) is not None, 15)
        out = kc.patch(PODS, "worker", {"metadata": {"annotations": {keys.TARGET_WORKERS: "3"}}}, namespace)
        kc.delete(PODS, "worker", namespace)  # unscheduled: gone at once
        wait_until("the watch delivers the deletion", lambda: caches.get(PODS, "worker", namespace) is None, 15)
        caches.put(PODS, out)  # the patch's answer, written through late
        assert caches.get(PODS, "worker", namespace) is None
        again = kc.create(PODS, pod, namespace)  # the same name again is a new object: taken
        caches.put(PODS, again)
        assert caches.get(PODS, "worker", namespace) is not None
    finally:
        caches.stop()
