"""Coexistence with Volcano 1.15's own gang-aware eviction (hack/volcano-scheduler-gang-native.conf:
gangpreempt, gangreclaim, cdp) left on next to our agent.

A box of its own (the tier's box runs our configuration). The agent is configured never to evict
(starvationSeconds far away), so every eviction is Volcano's: gangreclaim deletes elastic workers
of A for B, and the agent must count them as a scale event of A (cooldown stamp, Event) and not
evict on top. Also checks what Volcano itself sets on its victims (the condition the agent reads).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import NAMESPACES
from hack.localbox import Box, paths
from hack.localbox.box import version_tuple
from tests.harness.boxfixtures import box_fixture
from tests.harness.legacy import LEGACY_FLOW
from tests.harness.stack import COOLDOWN, Scenario, start_stack, wait_until

VOLCANO = paths.versions().get("VOLCANO_VERSION", "")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    version_tuple(VOLCANO) < (1, 15, 0),
    reason=f"gangpreempt/gangreclaim need Volcano >= v1.15 (VOLCANO_VERSION={VOLCANO})")]

box = box_fixture("full", "gang-native")  # a box of its own: Volcano's gang actions on


def gang_native_config() -> str:
    return ("agent: {intervalSeconds: 1}\n"
            "gating: {enabled: false}\n"
            f"defaults: {{cooldownSeconds: {COOLDOWN}, minRuntimeSeconds: 5, starvationSeconds: 3600,"
            f" maxScaleUpPerCycle: 8, {LEGACY_FLOW}}}\n")


def test_agent_counts_volcano_gang_evictions_as_scale_events(box: Box, tmp_path: Path) -> None:
    # Only `box` (this module's own) and its methods: the session fixtures kubeconfig, namespace,
    # box_process and serving_cert are bound to the tier's first box (ours), not to this one.
    kubeconfig = str(box.kubeconfig)
    kc = KubeClient.from_kubeconfig(kubeconfig)
    namespace = f"gang-native-{uuid.uuid4().hex[:5]}"
    kc.create(NAMESPACES, {"metadata": {"name": namespace}})
    cfg = tmp_path / "config.yaml"
    cfg.write_text(gang_native_config())
    started: list[str] = []

    def spawn(name: str, argv: list[str], env: dict[str, str] | None = None) -> Any:
        unique = f"{name}-{uuid.uuid4().hex[:4]}"
        started.append(unique)
        return box.spawn(unique, argv, env)

    start_stack(kc, box, spawn, kubeconfig, cfg, box.issue_serving_cert(tmp_path), namespace)
    sc = Scenario(kc, namespace)
    sc.queues()
    try:
        sc.fill_with_a(8, timeout=300)
        sc.start_b()
        wait_until("B's gang runs (Volcano's gangreclaim made room)", lambda: sc.obs.b_running_at is not None, 180)
        wait_until("A's victims gone", lambda: len(sc.obs.a_deleted) >= 2, 60)
        # The agent stamps A only for pods with condition DisruptionTarget, reason
        # PreemptionByScheduler: what Volcano 1.15's gang actions set before deleting.
        pg = wait_until("A's PodGroup stamped with Volcano's eviction", lambda: (
            ann := sc.annotations("a")) and "Volcano preempted" in ann.get("volcano-elastic.io/last-decision", "")
            and ann, 60)
        assert pg["volcano-elastic.io/last-scale-direction"] == "down"
        # Events go out through the recorder's outbox after the stamp: wait for it, do not race it.
        wait_until("the agent's Warning Event on A", lambda: sc.events("PreemptedByScheduler"), 30)
        assert not sc.events("EvictedForGang")  # the agent itself evicted nothing
        evicted = wait_until("Volcano's Evict Events", lambda: sc.events("Evict"), 30)  # its own, on each victim
        assert evicted and all("gangreclaim" in e.get("message", "") for e in evicted), evicted
        # our webhook marks only elastic workers preemptable: Volcano took nothing inside A's min
        assert all(int(n.rsplit("-", 1)[1]) >= 2 for n in sc.obs.a_deleted), sc.obs.a_deleted
        assert len(sc.obs.master_uids) == 1
    finally:
        sc.stop()
        sc.delete_queues()
        for name in reversed(started):
            box.stop(name)
        kc.close()
