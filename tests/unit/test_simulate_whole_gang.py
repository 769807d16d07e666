"""``wholeGangUpTo`` (``policy/admission.gang_workers``, issue 38): a small elastic job is admitted
whole (its gang is its max) instead of starting at its min in whatever room is left."""

from __future__ import annotations

import pytest

from elastic_controller.config import ConfigError, parse_config
from elastic_controller.policy.admission import gang_workers
from elastic_controller.simulate.trace import JobSpec
from tests.harness.simworld import run_elastic, with_defaults

# big holds 6 of the 8 GPUs for ten hours (min = max: nobody takes them); small (1..4) arrives after
JOBS = [JobSpec("big", 0.0, 6, 6, 1, 6 * 36_000.0), JobSpec("small", 600.0, 1, 4, 1, 4 * 3600.0)]


def test_gang_workers() -> None:
    assert gang_workers(1, 4, 0) == 1  # off: the min
    assert gang_workers(1, 4, 4) == 4  # small enough: whole
    assert gang_workers(2, 8, 4) == 2  # too big: its min
    with pytest.raises(ValueError, match="1 <= min <= max"):
        gang_workers(3, 2, 4)


def test_a_small_job_waits_to_start_whole() -> None:
    before = run_elastic(JOBS, with_defaults())
    whole = run_elastic(JOBS, with_defaults(wholeGangUpTo=4))
    # before: small starts at once in the two GPUs left and runs at 2 of 4 until big ends
    assert before["small"].start < 700 and before["small"].max_seen == 2
    # whole: it waits for big's end, then runs at 4 from its start to its end
    assert whole["small"].start >= 36_000 and whole["small"].min_seen == whole["small"].max_seen == 4
    assert whole["small"].restarts == 0
    assert whole["big"].finish == before["big"].finish  # the others are not touched


def test_the_key_is_validated() -> None:
    assert parse_config({"defaults": {"wholeGangUpTo": 4}}).defaults.wholeGangUpTo == 4
    with pytest.raises(ConfigError, match="wholeGangUpTo"):
        parse_config({"defaults": {"wholeGangUpTo": -1}})
