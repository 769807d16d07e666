"""bench/restart_classes.py --min-fraction: the trace transformation the trade-off curve is measured on."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import restart_classes as bench

from elastic_controller.simulate.trace import JobSpec


def job(lo: int, hi: int, counts: tuple[int, ...] = ()) -> JobSpec:
    return JobSpec(name=f"j-{lo}-{hi}", submit=0.0, min_workers=lo, max_workers=hi, gpus=8, work=3600.0,
                   worker_counts=counts)


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.5, 0.75, 1.0])
def test_min_is_raised_to_the_fraction_of_max_and_nothing_else_changes(fraction: float) -> None:
    jobs = [job(1, 2), job(1, 4), job(2, 8), job(4, 16), job(8, 8), job(3, 10)]
    out = bench.with_min_fraction(jobs, fraction)
    for before, after in zip(jobs, out, strict=True):
        assert after.max_workers == before.max_workers
        assert after.min_workers == max(before.min_workers, math.ceil(fraction * before.max_workers))
        assert (after.name, after.submit, after.gpus, after.work) == (before.name, before.submit, before.gpus,
                                                                      before.work)


def test_fraction_one_makes_every_job_rigid_and_zero_keeps_the_trace() -> None:
    jobs = [job(1, 4, (1, 2, 4)), job(2, 8)]
    assert all(j.min_workers == j.max_workers and not j.worker_counts for j in bench.with_min_fraction(jobs, 1.0))
    assert bench.with_min_fraction(jobs, 0.0) == jobs


def test_worker_counts_below_the_new_min_are_dropped_and_the_min_joins_them() -> None:
    (out,) = bench.with_min_fraction([job(1, 16, (1, 2, 4, 8, 16))], 0.3)
    assert out.min_workers == 5
    assert out.worker_counts == (5, 8, 16)


@pytest.mark.parametrize("text", ["x", "-0.1", "1.5", "0.5,,1"])
def test_bad_fractions_are_named(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a number|outside"):
        bench.parse_fractions(text)
    assert bench.parse_fractions("0,0.5,1") == [0.0, 0.5, 1.0]
