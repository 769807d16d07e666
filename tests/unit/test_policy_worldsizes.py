"""Valid world sizes: parsing the contract annotations, allowed counts, shrink/grow targets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_controller.policy.keys import WORKER_COUNTS, WORKER_STEP
from elastic_controller.policy.worldsizes import (
    UNCONSTRAINED,
    AllowedCounts,
    WorkerSizes,
    allowed_counts,
    check_worker_sizes,
    parse_worker_sizes,
)

PARSED = [
    ({}, WorkerSizes()),
    ({"other": "x"}, WorkerSizes()),
    ({WORKER_COUNTS: "2,4,8"}, WorkerSizes(counts=(2, 4, 8))),
    ({WORKER_COUNTS: " 8, 2 ,4 "}, WorkerSizes(counts=(2, 4, 8))),
    ({WORKER_COUNTS: "4,4,2"}, WorkerSizes(counts=(2, 4))),
    ({WORKER_COUNTS: "3"}, WorkerSizes(counts=(3,))),
    ({WORKER_STEP: "2"}, WorkerSizes(step=2)),
    ({WORKER_STEP: " 1 "}, WorkerSizes(step=1)),
]


@pytest.mark.parametrize(("annotations", "want"), PARSED, ids=[repr(a) for a, _ in PARSED])
def test_parse(annotations: dict[str, str], want: WorkerSizes) -> None:
    got = parse_worker_sizes(annotations)
    assert got == want
    assert got.constrained == (want != UNCONSTRAINED)


MALFORMED = [
    ({WORKER_COUNTS: ""}, "is empty"),
    ({WORKER_COUNTS: "2,,4"}, "'' is not a whole number"),
    ({WORKER_COUNTS: "2;4"}, "'2;4' is not a whole number"),
    ({WORKER_COUNTS: "2,four"}, "'four' is not a whole number"),
    ({WORKER_COUNTS: "0,2"}, "'0' must be at least 1"),
    ({WORKER_COUNTS: "-2,4"}, "'-2' is not a whole number"),
    ({WORKER_COUNTS: "2.5"}, "'2.5' is not a whole number"),
    ({WORKER_COUNTS: "²"}, "not a whole number"),
    ({WORKER_COUNTS: "1000000"}, "larger than"),
    ({WORKER_STEP: "0"}, "must be at least 1"),
    ({WORKER_STEP: "two"}, "not a whole number"),
    ({WORKER_STEP: "2,4"}, "not a whole number"),
    ({WORKER_STEP: ""}, "not a whole number"),
    ({WORKER_COUNTS: "2,4", WORKER_STEP: "2"}, "both"),
]


@pytest.mark.parametrize(("annotations", "needle"), MALFORMED, ids=[repr(a) for a, _ in MALFORMED])
def test_malformed_keeps_a_problem_and_allows_nothing(annotations: dict[str, str], needle: str) -> None:
    sizes = parse_worker_sizes(annotations)
    assert needle in sizes.problem
    assert sizes.constrained and sizes.counts is None and sizes.step is None
    allowed = sizes.allowed(2, 8)
    assert allowed.shrink_targets(8) == () and allowed.grow_targets(2) == ()
    assert 2 not in allowed and allowed.describe() == "none"
    verdict = check_worker_sizes(annotations, 2, 8)
    assert verdict.errors == (sizes.problem,) and not verdict.warnings


TARGETS = [
    # sizes, min, max, n, shrink targets, grow targets
    (WorkerSizes(counts=(2, 4, 8)), 2, 8, 8, (4, 2), ()),  # the issue: at 8 gives four workers or none
    (WorkerSizes(counts=(2, 4, 8)), 2, 8, 4, (2,), (8,)),
    (WorkerSizes(counts=(2, 4, 8)), 2, 8, 6, (4, 2), (8,)),  # at a count not listed (a worker failed)
    (WorkerSizes(counts=(2, 4, 8)), 2, 8, 2, (), (4, 8)),
    (WorkerSizes(step=2), 4, 8, 4, (), (6, 8)),  # the issue: at 4 with step 2 grows by two or not at all
    (WorkerSizes(step=2), 2, 8, 6, (4, 2), (8,)),
    (WorkerSizes(step=3), 2, 9, 5, (2,), (8,)),  # 2, 5, 8: 9 is never reached
    (WorkerSizes(step=10), 2, 8, 2, (), ()),
    (WorkerSizes(), 2, 5, 4, (3, 2), (5,)),
    (WorkerSizes(), 2, 5, 2, (), (3, 4, 5)),
    (WorkerSizes(), 3, 3, 3, (), ()),
    (WorkerSizes(counts=(1, 2, 4, 16)), 2, 8, 8, (4, 2), ()),  # counts outside the bounds are dropped
]


@pytest.mark.parametrize(("sizes", "lo", "hi", "n", "shrink", "grow"), TARGETS)
def test_targets(sizes: WorkerSizes, lo: int, hi: int, n: int, shrink: tuple[int, ...],
                 grow: tuple[int, ...]) -> None:
    allowed = sizes.allowed(lo, hi)
    assert allowed.shrink_targets(n) == shrink
    assert allowed.grow_targets(n) == grow
    assert allowed.shrink_amounts(n) == tuple(n - t for t in shrink)
    assert allowed.grow_amounts(n) == tuple(t - n for t in grow)


def test_membership_floor_and_describe() -> None:
    every = allowed_counts(UNCONSTRAINED, 2, 5)
    assert every.every and every.as_tuple() == (2, 3, 4, 5)
    assert [n in every for n in (1, 2, 5, 6)] == [False, True, True, False]
    assert "3" not in every  # type: ignore[operator]
    assert (every.floor(1), every.floor(4), every.floor(9)) == (None, 4, 5)
    assert every.describe() == "any of 2-5" and allowed_counts(UNCONSTRAINED, 3, 3).describe() == "3"
    step = allowed_counts(WorkerSizes(step=3), 2, 9)
    assert step.as_tuple() == (2, 5, 8) and not step.every
    assert (step.floor(1), step.floor(7), step.floor(9)) == (None, 5, 8)
    assert step.describe() == "2,5,8"
    assert allowed_counts(UNCONSTRAINED, 5, 2).as_tuple() == ()


def test_large_unconstrained_range_is_not_materialised() -> None:
    allowed = allowed_counts(UNCONSTRAINED, 1, 10**9)
    assert allowed.counts is None and 10**9 in allowed and allowed.floor(10**12) == 10**9


CHECKS = [
    # annotations, min, max, error needle, warning needle
    ({}, 2, 8, "", ""),
    ({WORKER_COUNTS: "2,4,8"}, 2, 8, "", ""),
    ({WORKER_COUNTS: "2,4,8,16"}, 2, 8, "lists 16, outside elasticPolicy [minReplicas=2, maxReplicas=8]", ""),
    ({WORKER_COUNTS: "1,2,4"}, 2, 4, "lists 1, outside", ""),
    ({WORKER_COUNTS: "4,8"}, 2, 8, "does not include minReplicas (2)", ""),
    ({WORKER_COUNTS: "2,4"}, 2, 8, "", "never reaches maxReplicas (8): the job grows to at most 4 workers"),
    ({WORKER_STEP: "2"}, 2, 8, "", ""),
    ({WORKER_STEP: "4"}, 2, 8, "", "worker-step 4 from 2 never reaches maxReplicas (8)"),
    ({WORKER_STEP: "1"}, 3, 3, "", ""),
]


@pytest.mark.parametrize(("annotations", "lo", "hi", "error", "warning"), CHECKS)
def test_check(annotations: dict[str, str], lo: int, hi: int, error: str, warning: str) -> None:
    verdict = check_worker_sizes(annotations, lo, hi)
    assert (error in " ".join(verdict.errors)) and bool(verdict.errors) == bool(error)
    assert (warning in " ".join(verdict.warnings)) and bool(verdict.warnings) == bool(warning)
    assert all(len(w) < 256 for w in verdict.warnings)


# ---------------------------------------------------------------------- properties
@st.composite
def sizes_and_bounds(draw: st.DrawFn) -> tuple[WorkerSizes, int, int, int]:
    lo = draw(st.integers(1, 12))
    hi = draw(st.integers(lo - 1, 24))  # hi < lo too: nothing is allowed then
    kind = draw(st.sampled_from(["none", "counts", "step", "bad"]))
    if kind == "counts":
        sizes = parse_worker_sizes({WORKER_COUNTS: ",".join(
            map(str, draw(st.lists(st.integers(1, 30), min_size=1, max_size=8))))})
    elif kind == "step":
        sizes = parse_worker_sizes({WORKER_STEP: str(draw(st.integers(1, 10)))})
    elif kind == "bad":
        sizes = parse_worker_sizes({WORKER_STEP: draw(st.sampled_from(["0", "x", "", "1.5"]))})
    else:
        sizes = UNCONSTRAINED
    return sizes, lo, hi, draw(st.integers(0, 30))


def _reference(sizes: WorkerSizes, lo: int, hi: int) -> set[int]:
    if sizes.problem:
        return set()
    if sizes.counts is not None:
        return {c for c in sizes.counts if lo <= c <= hi}
    step = sizes.step or 1
    return {c for c in range(lo, hi + 1) if (c - lo) % step == 0}


@settings(max_examples=400, deadline=None)
@given(sizes_and_bounds())
def test_targets_are_always_allowed_and_within_bounds(case: tuple[WorkerSizes, int, int, int]) -> None:
    sizes, lo, hi, n = case
    allowed = sizes.allowed(lo, hi)
    reference = _reference(sizes, lo, hi)
    assert set(allowed.as_tuple()) == reference
    assert all((c in allowed) == (c in reference) for c in range(0, 32))
    shrink, grow = allowed.shrink_targets(n), allowed.grow_targets(n)
    for t in shrink + grow:
        assert t in allowed and lo <= t <= hi
    assert set(shrink) == {c for c in reference if c < n}
    assert set(grow) == {c for c in reference if c > n}
    assert list(shrink) == sorted(shrink, reverse=True) and list(grow) == sorted(grow)  # nearest first
    assert all(a > 0 for a in allowed.shrink_amounts(n) + allowed.grow_amounts(n))
    below = [c for c in reference if c <= n]
    assert allowed.floor(n) == (max(below) if below else None)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=10), st.integers(1, 10), st.integers(0, 20))
def test_an_admitted_contract_always_allows_min(counts: list[int], lo: int, extra: int) -> None:
    """What the webhook admits never leaves the gang at a count the training cannot use."""
    hi = lo + extra
    annotations = {WORKER_COUNTS: ",".join(map(str, counts))}
    if check_worker_sizes(annotations, lo, hi).errors:
        return
    allowed = parse_worker_sizes(annotations).allowed(lo, hi)
    assert lo in allowed and set(allowed.as_tuple()) == set(counts)


def test_allowed_counts_is_a_value() -> None:
    assert AllowedCounts(2, 8, (2, 4)) == allowed_counts(WorkerSizes(counts=(2, 4)), 2, 8)
