"""e2e with Volcano's ``capacity`` plugin and hierarchical queues
(hack/volcano-scheduler-capacity-hierarchy.conf, a box of its own; the scheduler creates ``root``)
and our agent configured ``shares: {plugin: capacity, hierarchy: true}``. The stories are in
capacity_scenarios.py; each puts its queues under a department queue of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import QUEUES
from tests.harness import capacity_scenarios as story
from tests.harness.boxfixtures import api_client, box_fixture, box_process, kube, kubeconfig, namespace, serving_cert

pytestmark = pytest.mark.e2e
# This module's own box (another Volcano scheduler configuration); the shared fixtures re-bound to it.
box = box_fixture("full", "capacity-hierarchy")
__all__ = ["api_client", "box", "box_process", "kube", "kubeconfig", "namespace", "serving_cert"]


@pytest.fixture
def kc(kubeconfig: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


def test_root_queue_exists(kc: KubeClient) -> None:
    """The scheduler creates ``root`` (pkg/scheduler/cache/cache.go newDefaultAndRootQueue)."""
    assert kc.get(QUEUES, "root")["metadata"]["name"] == "root"


@pytest.mark.parametrize("tale", [story.reclaim_from_best_effort_sibling, story.guarantee_is_kept,
                                  story.idle_beyond_deserved_no_evictions, story.department_capability],
                         ids=lambda f: f.__name__)
def test_capacity_hierarchy(tale: Any, kc: KubeClient, box: Any, box_process: Any, kubeconfig: str,
                            namespace: str, serving_cert: tuple[Path, Path], tmp_path: Path) -> None:
    story.run_story(tale, kc, True, box, box_process, kubeconfig, namespace, serving_cert, tmp_path)
