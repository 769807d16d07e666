"""The indexed victim search on synthetic clusters (bench/_synth.py) decides exactly what the
exhaustive node scan decides (250 nodes: enough to catch the bucket-bound bugs met while writing
the index, small enough to stay quick)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from elastic_controller.policy.settings import ElasticConfig, QueuePolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _synth import NOW, synth_cluster

from tests.harness.builders import plan_fast_and_exhaustive


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cfg", [pytest.param(ElasticConfig(), id="defaults"),
                                 pytest.param(ElasticConfig(defaults=QueuePolicy(maxEvictionsPerCycle=64,
                                                                                 minRuntimeSeconds=0)),
                                              id="generous")])
def test_indexed_search_equals_exhaustive_scan(seed: int, cfg: ElasticConfig) -> None:
    fast, slow = plan_fast_and_exhaustive(synth_cluster(250, seed=seed), cfg, NOW)
    assert fast == slow
    assert fast.evictions, "the synthetic cluster should need evictions"
