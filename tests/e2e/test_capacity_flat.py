"""e2e with Volcano's ``capacity`` plugin, flat queues (hack/volcano-scheduler-capacity.conf, a box
of its own) and our agent configured ``shares: {plugin: capacity}``. The stories are in
capacity_scenarios.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import AlreadyExistsError, KubeError
from elastic_controller.kube.resources import CONFIGMAPS, EVENTS, NAMESPACES
from tests.harness import capacity_scenarios as story
from tests.harness.boxfixtures import api_client, box_fixture, box_process, kube, kubeconfig, namespace, serving_cert
from tests.harness.stack import wait_until

pytestmark = pytest.mark.e2e
# This module's own box (another Volcano scheduler configuration); the shared fixtures re-bound to it.
box = box_fixture("full", "capacity")
__all__ = ["api_client", "box", "box_process", "kube", "kubeconfig", "namespace", "serving_cert"]
HACK = Path(__file__).resolve().parents[2] / "hack"


@pytest.fixture
def kc(kubeconfig: str) -> Iterator[KubeClient]:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


@pytest.mark.parametrize("tale", [story.reclaim_from_best_effort_sibling, story.guarantee_is_kept,
                                  story.idle_beyond_deserved_no_evictions], ids=lambda f: f.__name__)
def test_capacity_flat(tale: Any, kc: KubeClient, box: Any, box_process: Any, kubeconfig: str, namespace: str,
                       serving_cert: tuple[Path, Path], tmp_path: Path) -> None:
    story.run_story(tale, kc, False, box, box_process, kubeconfig, namespace, serving_cert, tmp_path)


def test_agent_warns_when_the_scheduler_runs_the_other_plugin(kc: KubeClient, box: Any, box_process: Any,
                                                              kubeconfig: str, namespace: str,
                                                              tmp_path: Path) -> None:
    """The scheduler's ConfigMap enables proportion, our config says capacity: a Warning Event
    SharesPluginMismatch on the ConfigMap and a warning in the agent's log."""
    try:
        kc.create(NAMESPACES, {"metadata": {"name": "volcano-system"}})
    except AlreadyExistsError:
        pass
    name = "volcano-scheduler-configmap"
    try:
        kc.delete(CONFIGMAPS, name, "volcano-system")
    except KubeError:
        pass
    kc.create(CONFIGMAPS, {"metadata": {"name": name},
                           "data": {"volcano-scheduler.conf": (HACK / "volcano-scheduler-ours.conf").read_text()}},
              "volcano-system")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(story.config_text(hierarchy=False))
    try:
        proc = box_process("controller", [sys.executable, "-m", "elastic_controller", "controller", "--kubeconfig",
                                          kubeconfig, "--config", str(cfg), "--lease-namespace", namespace,
                                          "--http-port", "0"])
        event = wait_until("a SharesPluginMismatch Event", lambda: next(
            (e for e in kc.list(EVENTS, "volcano-system")[0] if e.get("reason") == "SharesPluginMismatch"), None), 60)
        assert event["type"] == "Warning" and event["involvedObject"]["name"] == name
        assert "runs the proportion plugin" in event["message"]
        records = [json.loads(line) for line in Path(proc.log).read_text().splitlines() if line.startswith("{")]
        warned = [r for r in records if "QUEUE SHARES DO NOT MATCH THE VOLCANO SCHEDULER" in r.get("msg", "")]
        assert warned and warned[0]["level"] == "warning" and str(warned[0].get("shares")).startswith("capacity")
    finally:
        kc.delete(CONFIGMAPS, name, "volcano-system")
