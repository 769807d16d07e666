"""The eviction notice on the whole box (issue 20): with ``noticeSeconds: 10``, a victim of the agent
is marked ``volcano-elastic.io/evict-after`` and told by an ``EvictionNotice`` Event, stays until the
notice ends and is evicted within a couple of agent cycles after it; or at once when its job records
a checkpoint (``volcano-elastic.io/last-checkpoint-time``) after the notice began.

Job A (elastic 2..8 workers of 4 GPUs, queue dept-a) fills the 4 x 8 GPUs; job B (rigid, 2 workers,
queue dept-b) needs two of A's elastic workers (test_elastic_scaling's scenario)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import PYTORCHJOBS
from elastic_controller.policy.times import format_time, parse_time
from tests.harness.stack import Scenario, stack_scenario, wait_until

pytestmark = pytest.mark.e2e
NOTICE = 10
INTERVAL = 1  # the agent's intervalSeconds
EVICT_AFTER = "volcano-elastic.io/evict-after"
EVICTED_FOR = "volcano-elastic.io/evicted-for"
CHECKPOINT = "volcano-elastic.io/last-checkpoint-time"
# Slack for a loaded 2-core box shared with other sessions: the agent's cycle, the API server's
# watch, and this test's 0.2 s polling.
LATE = 2 * INTERVAL + 4.0


def config_text() -> str:
    return (f"agent: {{intervalSeconds: {INTERVAL}}}\n"
            "gating: {enabled: true}\n"
            "defaults: {cooldownSeconds: 30, minRuntimeSeconds: 5, starvationSeconds: 3,"
            f" maxScaleUpPerCycle: 8, minScaleUpGain: 0.3, wholeGangUpTo: 0, elasticMinShare: 1,"
            f" noticeSeconds: {NOTICE}}}\n")


@pytest.fixture
def kc(kubeconfig: str) -> Any:
    client = KubeClient.from_kubeconfig(kubeconfig)
    yield client
    client.close()


def _gone_or_deleting(sc: Scenario, uids: set[str]) -> set[str]:
    """The victims (by uid: the operator recreates an evicted worker under the same name) evicted."""
    live = {p["metadata"]["uid"] for p in sc.pods("a") if not p["metadata"].get("deletionTimestamp")}
    return uids - live


def _under_notice(sc: Scenario) -> list[dict[str, Any]]:
    return [p for p in sc.pods("a") if EVICT_AFTER in (p["metadata"].get("annotations") or {})
            and not p["metadata"].get("deletionTimestamp")]


def _notice(sc: Scenario) -> tuple[set[str], set[str], datetime, float]:
    """Start B and wait for the notice: (victims' names, their uids, evict-after, wall time it was
    first seen)."""
    sc.start_b()
    victims = wait_until("A's victims under notice", lambda: (v := _under_notice(sc)) and len(v) >= 2 and v, 120,
                         interval=0.2)
    seen = time.time()
    names = {p["metadata"]["name"] for p in victims}
    uids = {p["metadata"]["uid"] for p in victims}
    stamps = {p["metadata"]["annotations"][EVICT_AFTER] for p in victims}
    assert len(stamps) == 1, stamps  # one gang's victims, one notice
    deadline = parse_time(stamps.pop())
    assert deadline is not None
    gang = {p["metadata"]["annotations"].get(EVICTED_FOR) for p in victims}
    assert gang == {f"{sc.ns}/b"}, gang
    assert all(int(n.rsplit("-", 1)[1]) >= 2 for n in names), names  # elastic workers only
    # The notice runs NOTICE seconds from when it was given (a whole second, rounded up; seen up to
    # a few seconds late on a loaded box).
    assert NOTICE - 3 <= deadline.timestamp() - seen <= NOTICE + 1, (deadline, seen)
    return names, uids, deadline, seen


def _events(sc: Scenario, reason: str, names: set[str]) -> list[dict[str, Any]]:
    return [e for e in sc.events(reason) if e["involvedObject"]["name"] in names]


def _run(kc: KubeClient, box: Any, box_process: Any, kubeconfig: str, namespace: str,
         serving_cert: tuple[Path, Path], tmp_path: Path, checkpoint: bool) -> None:
    with stack_scenario(kc, box, box_process, kubeconfig, namespace, serving_cert, tmp_path, config_text()) as sc:
        sc.fill_with_a(8)
        names, uids, deadline, seen = _notice(sc)
        wait_until("an EvictionNotice Event on each victim", lambda: len(
            {e["involvedObject"]["name"] for e in _events(sc, "EvictionNotice", names)}) == len(names), 20)
        wait_until("an EvictionNotice Event on job A", lambda: _events(sc, "EvictionNotice", {"a"}), 20)
        began = deadline.timestamp() - NOTICE
        written = 0.0
        if checkpoint:
            # The training code checkpoints and records it (RFC 3339, whole seconds): a time later
            # than the notice's start.
            while time.time() < began + 1.2:
                time.sleep(0.1)
            written = time.time()
            kc.patch(PYTORCHJOBS, "a", {"metadata": {"annotations": {
                CHECKPOINT: format_time(datetime.fromtimestamp(written, UTC))}}}, namespace)
        # Poll until both victims are evicted; the first eviction's time is what the notice governs.
        first = 0.0
        limit = time.monotonic() + NOTICE + 60
        while time.monotonic() < limit:
            gone = _gone_or_deleting(sc, uids)
            if gone and not first:
                first = time.time()
            if gone == uids:
                break
            time.sleep(0.2)
        assert first, f"no victim evicted within {NOTICE + 60}s of the notice"
        wait_until("both victims evicted", lambda: _gone_or_deleting(sc, uids) == uids, 30)
        after_notice = first - seen
        if checkpoint:
            assert first - written <= LATE, f"evicted {first - written:.1f}s after the checkpoint"
            assert first < deadline.timestamp() - 3, "the checkpoint did not end the notice early"
            why = "checkpointed at"
        else:
            assert first >= deadline.timestamp() - 0.5, \
                f"evicted {deadline.timestamp() - first:.1f}s before the notice ended"
            assert first - deadline.timestamp() <= LATE, \
                f"evicted {first - deadline.timestamp():.1f}s after the notice ended"
            why = "notice ended at"
        evicted = wait_until("EvictedForGang Events on the victims", lambda: (
            ev := _events(sc, "EvictedForGang", names)) and len(ev) >= len(names) and ev, 30)
        assert all(why in e["message"] for e in evicted), [e["message"] for e in evicted]
        wait_until("B's gang runs", lambda: len(sc.running("b")) >= 2, 120)
        assert sc.obs.a_running_min >= 2  # never below min
        assert len(sc.obs.master_uids) == 1  # the master never evicted
        assert not _events(sc, "EvictionNoticeWithdrawn", names)
        print(f"{'checkpoint' if checkpoint else 'no checkpoint'}: notice seen {seen:.1f}, evict-after "
              f"{deadline.timestamp():.1f}, first eviction {after_notice:.1f}s after the notice was seen"
              + (f", {first - written:.1f}s after the checkpoint was written" if checkpoint else
                 f", {first - deadline.timestamp():+.1f}s from evict-after"))


def test_victim_is_evicted_when_its_notice_ends(kc: KubeClient, box: Any, box_process: Any, kubeconfig: str,
                                                namespace: str, serving_cert: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    _run(kc, box, box_process, kubeconfig, namespace, serving_cert, tmp_path, checkpoint=False)


def test_victim_is_evicted_at_once_after_its_job_checkpoints(kc: KubeClient, box: Any, box_process: Any,
                                                             kubeconfig: str, namespace: str,
                                                             serving_cert: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    _run(kc, box, box_process, kubeconfig, namespace, serving_cert, tmp_path, checkpoint=True)
