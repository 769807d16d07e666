"""bench/agent_vs_native.py's pure parts: ours runs the shipped defaults with only the time constants
shortened (so the side by side measures what an admin gets), its GPU-idle integral, its medians."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import agent_vs_native as bench

from elastic_controller.config import ConfigError
from elastic_controller.policy.settings import AgentConfig, ElasticConfig, QueuePolicy

TIME_KEYS = {"cooldownSeconds", "minRuntimeSeconds", "starvationSeconds", "firstRendezvousSeconds",
             "scaleUpAfterCheckpointSeconds"}


def test_ours_runs_the_shipped_defaults_with_only_time_constants_shortened() -> None:
    _, cfg = bench.agent_config(None, gating=True)
    shipped = ElasticConfig()
    assert set(bench.BOX_TIME) == TIME_KEYS
    for f in dataclasses.fields(QueuePolicy):
        got, default = getattr(cfg.defaults, f.name), getattr(shipped.defaults, f.name)
        if f.name in TIME_KEYS:
            # shortened by the same factor, never lengthened or switched off
            assert got == default // 10 and got > 0, f.name
        else:
            assert got == default, f"{f.name}: the bench must run the shipped default"
    assert cfg.defaults.minScaleUpGain == 1.0 and cfg.defaults.scaleUpSnoozeSeconds is None
    assert cfg.agent == dataclasses.replace(AgentConfig(), intervalSeconds=bench.AGENT_INTERVAL)
    assert cfg.gating.enabled and cfg.queues == {} and cfg.shares == shipped.shares
    assert not bench.agent_config(None, gating=False)[1].gating.enabled


def test_agent_config_file_forces_gating_and_reports_problems(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("gating: {enabled: false}\ndefaults: {minScaleUpGain: 0.3, cooldownSeconds: 30}\n")
    _, cfg = bench.agent_config(str(good), gating=True)
    assert cfg.gating.enabled and cfg.defaults.minScaleUpGain == 0.3
    bad = tmp_path / "bad.yaml"
    bad.write_text("defaults: {cooldownSecs: 30}\n")
    with pytest.raises(ConfigError, match="cooldownSecs: unknown key"):
        bench.agent_config(str(bad), gating=True)


def test_integral_holds_each_sample_until_the_next() -> None:
    w = bench.Watch(kc=None, ns="bench", min_workers=2)  # type: ignore[arg-type]
    w.samples = [(0.0, 0, 8), (10.0, 8, 6), (40.0, 0, 6)]
    assert w.integral(0.0, 100.0) == (8 * 30, 8 * 10 + 6 * 90)
    assert w.integral(20.0, 30.0) == (80, 60)


def test_bursts_coalesce_changes_within_five_seconds() -> None:
    w = bench.Watch(kc=None, ns="bench", min_workers=2)  # type: ignore[arg-type]
    w.changes = [(0.0, 8, 2), (2.0, 2, 6), (6.5, 6, 8), (40.0, 8, 6)]
    assert [(b[0][1], b[-1][2]) for b in w.bursts()] == [(8, 8), (8, 6)]


def _entry(mode: str, scenario: str, **kw: Any) -> dict[str, Any]:
    base = dict.fromkeys(bench.FIELDS, 0)
    return {"mode": mode, "scenario": scenario, **base, **kw}


def test_medians_table_says_never_and_adds_the_churn_table_for_d() -> None:
    rows = [_entry("ours", "a", waitingGangRunsAfterSeconds=4.0, restarts=1),
            _entry("ours", "a", waitingGangRunsAfterSeconds=5.0, restarts=1),
            _entry("gang-native", "a", waitingGangRunsAfterSeconds=None),
            _entry("ours", "d", cGangRunsAfterSeconds=0.5, idleGpuSecondsChurn=240, aWorkersMeanChurn=6.0)]
    table = bench.medians(rows)
    assert "| a | ours | 2 | 4.5 | 0 | 0 | 0 | 1 |" in table
    assert "| a | gang-native | 1 | never |" in table
    assert "| d | ours | 1 | 0.5 | 240 | 6 |" in table
    assert bench.medians(rows[:3]).count("| scenario |") == 1
