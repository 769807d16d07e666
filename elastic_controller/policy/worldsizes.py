"""Valid world sizes: the Worker counts a job's training code can run with.

A PyTorchJob (and, copied by the controller, its PodGroup) may carry one of

- ``volcano-elastic.io/worker-counts: "2,4,8"``: exactly these Worker counts;
- ``volcano-elastic.io/worker-step: "2"``: the counts min, min+2, min+4, ... up to max;

and, without either, every count in [min, max] is allowed. ``parse_worker_sizes`` reads the
annotations as written (never raises: what is wrong is kept in ``problem``); ``allowed_counts``
turns them into the counts allowed for a job's (min, max); ``AllowedCounts`` answers which
shrink and grow targets exist from a given count. ``check_worker_sizes`` is what the validating
webhook tells a job's owner. Pure: the planner, the controller and the webhook share it.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass

from .keys import WORKER_COUNTS, WORKER_STEP

MAX_COUNT = 100_000  # a bigger count in an annotation is a typo, not a world size


@dataclass(frozen=True, slots=True)
class WorkerSizes:
    """The contract annotations as written: ``counts`` or ``step`` or neither (any count)."""

    counts: tuple[int, ...] | None = None  # ascending, distinct
    step: int | None = None
    problem: str = ""  # why the annotations cannot be used; "" when they can

    @property
    def constrained(self) -> bool:
        """True when the job restricts its Worker counts (or tried to and got it wrong)."""
        return self.counts is not None or self.step is not None or bool(self.problem)

    def allowed(self, min_replicas: int, max_replicas: int) -> AllowedCounts:
        return allowed_counts(self, min_replicas, max_replicas)


UNCONSTRAINED = WorkerSizes()


def _positive(text: str, what: str) -> int:
    token = text.strip()
    if not token.isdecimal() or not token.isascii():
        raise ValueError(f"{what} {token!r} is not a whole number")
    value = int(token)
    if value < 1:
        raise ValueError(f"{what} {token!r} must be at least 1")
    if value > MAX_COUNT:
        raise ValueError(f"{what} {token!r} is larger than {MAX_COUNT}")
    return value


def parse_counts(text: str) -> tuple[int, ...]:
    """``"2, 4,8"`` -> (2, 4, 8); raises ValueError with a message for the job's owner."""
    if not text.strip():
        raise ValueError(f"{WORKER_COUNTS} is empty: list the Worker counts the training can use, e.g. \"2,4,8\"")
    try:
        values = [_positive(part, "count") for part in text.split(",")]
    except ValueError as exc:
        raise ValueError(f"{WORKER_COUNTS} {text!r}: {exc}; write the allowed Worker counts separated by "
                         "commas, e.g. \"2,4,8\"") from None
    return tuple(sorted(set(values)))


def parse_step(text: str) -> int:
    try:
        return _positive(text, "step")
    except ValueError as exc:
        raise ValueError(f"{WORKER_STEP} {text!r}: {exc}; write one whole number N >= 1 (the Worker "
                         "counts are then minReplicas, minReplicas+N, ... up to maxReplicas)") from None


def parse_worker_sizes(annotations: Mapping[str, str]) -> WorkerSizes:
    """The contract in ``annotations`` (a job's or its PodGroup's); never raises."""
    counts_text = annotations.get(WORKER_COUNTS)
    step_text = annotations.get(WORKER_STEP)
    if counts_text is None and step_text is None:
        return UNCONSTRAINED
    if counts_text is not None and step_text is not None:
        return WorkerSizes(problem=f"both {WORKER_COUNTS} and {WORKER_STEP} are set: use one of them "
                                   "(a list of counts, or a step from minReplicas)")
    try:
        if counts_text is not None:
            return WorkerSizes(counts=parse_counts(counts_text))
        assert step_text is not None
        return WorkerSizes(step=parse_step(step_text))
    except ValueError as exc:
        return WorkerSizes(problem=str(exc))


@dataclass(frozen=True, slots=True)
class AllowedCounts:
    """The Worker counts a job may be shrunk or grown to, all within [lo, hi].

    ``counts`` None means every count in [lo, hi] (not materialised: max may be large); an empty
    tuple means none (an unusable contract: such a job is never resized).
    """

    lo: int
    hi: int
    counts: tuple[int, ...] | None = None

    def __contains__(self, n: object) -> bool:
        if not isinstance(n, int) or not self.lo <= n <= self.hi:
            return False
        if self.counts is None:
            return True
        i = bisect.bisect_left(self.counts, n)
        return i < len(self.counts) and self.counts[i] == n

    @property
    def every(self) -> bool:
        """True when every count in [lo, hi] is allowed (no constraint)."""
        return self.counts is None

    def as_tuple(self) -> tuple[int, ...]:
        return tuple(range(self.lo, self.hi + 1)) if self.counts is None else self.counts

    def shrink_targets(self, n: int) -> tuple[int, ...]:
        """Allowed counts below ``n``, nearest first (a job at 8 with counts 2,4,8: (4, 2))."""
        if self.counts is None:
            return tuple(range(min(n - 1, self.hi), self.lo - 1, -1))
        return tuple(reversed(self.counts[: bisect.bisect_left(self.counts, n)]))

    def grow_targets(self, n: int) -> tuple[int, ...]:
        """Allowed counts above ``n``, nearest first (a job at 4 with step 2, max 8: (6, 8))."""
        if self.counts is None:
            return tuple(range(max(n + 1, self.lo), self.hi + 1))
        return self.counts[bisect.bisect_right(self.counts, n):]

    def shrink_amounts(self, n: int) -> tuple[int, ...]:
        """How many workers a job at ``n`` may give, fewest first (at 8 with 2,4,8: (4, 6))."""
        return tuple(n - t for t in self.shrink_targets(n))

    def grow_amounts(self, n: int) -> tuple[int, ...]:
        """How many workers a job at ``n`` may gain, fewest first (at 4 with step 2, max 8: (2, 4))."""
        return tuple(t - n for t in self.grow_targets(n))

    def floor(self, n: int) -> int | None:
        """The largest allowed count <= ``n`` (None when there is none)."""
        if self.counts is None:
            return min(n, self.hi) if n >= self.lo else None
        i = bisect.bisect_right(self.counts, n)
        return self.counts[i - 1] if i else None

    def describe(self) -> str:
        """For ``status`` and reasons: "any of 2-8", "2,4,8", "none (...)"."""
        if self.counts is None:
            return f"any of {self.lo}-{self.hi}" if self.hi > self.lo else str(self.lo)
        return ",".join(map(str, self.counts)) if self.counts else "none"


def allowed_counts(sizes: WorkerSizes, min_replicas: int, max_replicas: int) -> AllowedCounts:
    """The counts ``sizes`` allows for a job with Worker bounds [min_replicas, max_replicas].

    Listed counts outside the bounds are dropped (the webhook denies them; a job admitted
    before the webhook is not resized outside its bounds either); an unusable contract
    (``sizes.problem``) allows nothing, so the job keeps its size.
    """
    lo, hi = min_replicas, max_replicas
    if sizes.problem or hi < lo:
        return AllowedCounts(lo, hi, ())
    if sizes.counts is not None:
        return AllowedCounts(lo, hi, tuple(c for c in sizes.counts if lo <= c <= hi))
    if sizes.step is not None:
        return AllowedCounts(lo, hi, tuple(range(lo, hi + 1, sizes.step)))
    return AllowedCounts(lo, hi)


@dataclass(frozen=True, slots=True)
class SizeVerdict:
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def check_worker_sizes(annotations: Mapping[str, str], min_replicas: int, max_replicas: int) -> SizeVerdict:
    """What the webhook says about a job's contract, given its effective Worker bounds."""
    sizes = parse_worker_sizes(annotations)
    if sizes.problem:
        return SizeVerdict(errors=(sizes.problem,))
    lo, hi = min_replicas, max_replicas
    bounds = f"[minReplicas={lo}, maxReplicas={hi}]"
    if sizes.counts is not None:
        outside = [c for c in sizes.counts if not lo <= c <= hi]
        if outside:
            shown = ", ".join(map(str, outside))
            return SizeVerdict(errors=(
                f"{WORKER_COUNTS} lists {shown}, outside elasticPolicy {bounds}: the job never has fewer "
                f"than minReplicas or more than maxReplicas workers; list counts within the bounds",))
        if lo not in sizes.counts:
            return SizeVerdict(errors=(
                f"{WORKER_COUNTS} ({','.join(map(str, sizes.counts))}) does not include minReplicas ({lo}): "
                f"the job's gang starts with minReplicas workers and may be shrunk back to them, so "
                f"{lo} must be a count your training can run with; add it (or change minReplicas)",))
    top = allowed_counts(sizes, lo, hi).floor(hi)
    if top is not None and top < hi:
        source = WORKER_COUNTS if sizes.counts is not None else f"{WORKER_STEP} {sizes.step} from {lo}"
        return SizeVerdict(warnings=(
            f"{source} never reaches maxReplicas ({hi}): the job grows to at most {top} workers and "
            f"the rest wait gated; set maxReplicas (and Worker.replicas) to {top}",))
    return SizeVerdict()
