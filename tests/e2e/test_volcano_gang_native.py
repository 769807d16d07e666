"""Coexistence with Volcano 1.15's own gang-aware eviction (hack/volcano-scheduler-gang-native.conf:
gangpreempt, gangreclaim, cdp) left on next to our agent.

A box of its own (the tier's box runs our configuration). The agent is configured never to evict
(starvationSeconds far away), so every eviction is Volcano's: gangreclaim deletes elastic workers
of A for B, and the agent must count them as a scale event of A (cooldown stamp, Event) and not
evict on top. Also checks what Volcano itself sets on its victims (the condition the agent reads).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import NAMESPACES
from hack.localbox import Box, BoxOptions, describe_missing, missing_binaries, paths
from hack.localbox.box import PROFILES, version_tuple
from tests.e2e.test_elastic_scaling import COOLDOWN, Scenario, start_stack, wait_until

pytestmark = pytest.mark.e2e


def gang_native_config() -> str:
    return ("agent: {intervalSeconds: 1}\n"
            "gating: {enabled: false}\n"
            f"defaults: {{cooldownSeconds: {COOLDOWN}, minRuntimeSeconds: 5, starvationSeconds: 3600,"
            " maxScaleUpPerCycle: 8}\n")


@pytest.fixture(scope="module")
def gang_box() -> Iterator[Box]:
    volcano = paths.versions().get("VOLCANO_VERSION", "")
    if version_tuple(volcano) < (1, 15, 0):
        pytest.skip(f"gangpreempt/gangreclaim need Volcano >= v1.15 (VOLCANO_VERSION={volcano})")
    missing = missing_binaries(PROFILES["full"])
    if missing:
        pytest.skip(describe_missing(missing))
    box = Box(BoxOptions(name=f"pytest-gang-native-{int(time.time()) % 100000}", profile="full",
                         volcano_conf="gang-native", quiet=True))
    box.up()
    yield box
    box.down(quiet=True)


def test_agent_counts_volcano_gang_evictions_as_scale_events(gang_box: Box) -> None:
    kc = KubeClient.from_kubeconfig(str(gang_box.kubeconfig))
    ns = "gang-native"
    kc.create(NAMESPACES, {"metadata": {"name": ns}})
    tmp = Path(tempfile.mkdtemp(prefix="gang-native-"))
    cfg = tmp / "config.yaml"
    cfg.write_text(gang_native_config())
    started: list[str] = []

    def spawn(name: str, argv: list[str], env: dict[str, str] | None = None) -> Any:
        started.append(name)
        return gang_box.spawn(name, argv, env)

    start_stack(kc, gang_box, spawn, str(gang_box.kubeconfig), cfg, gang_box.issue_serving_cert(tmp), ns)
    sc = Scenario(kc, ns)
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
        assert sc.events("PreemptedByScheduler"), "the agent's Warning Event on A"
        assert not sc.events("EvictedForGang")  # the agent itself evicted nothing
        evicted = sc.events("Evict")  # Volcano's own Event on each victim
        assert evicted and all("gangreclaim" in e.get("message", "") for e in evicted), evicted
        # our webhook marks only elastic workers preemptable: Volcano took nothing inside A's min
        assert all(int(n.rsplit("-", 1)[1]) >= 2 for n in sc.obs.a_deleted), sc.obs.a_deleted
        assert len(sc.obs.master_uids) == 1
    finally:
        sc.stop()
        sc.delete_queues()
        for name in started:
            gang_box.stop(name)
        kc.close()
