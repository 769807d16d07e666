"""The simulator applies the fairness scale-down and the attained-service order as the agent plans
them (issue 38): a small job that arrives after a big one took the cluster gets workers back from it."""

from __future__ import annotations

from elastic_controller.policy.settings import ORDER_BY_FULFILLMENT
from elastic_controller.simulate.trace import JobSpec
from tests.harness.simworld import run_elastic, with_defaults

JOBS = [JobSpec("rich", 0.0, 2, 8, 1, 8 * 36_000.0), JobSpec("poor", 3600.0, 1, 4, 1, 4 * 7200.0)]


def test_the_big_job_gives_the_small_one_its_workers() -> None:
    fair = run_elastic(JOBS, with_defaults())
    unfair = run_elastic(JOBS, with_defaults(fairnessScaleDown=False, orderBy=ORDER_BY_FULFILLMENT))
    # without it poor gets its min (one worker, for which rich gave one as a starving gang) and no more
    assert unfair["poor"].max_seen == 1
    # with it rich gives poor the workers for its growth: poor reaches its max and ends far sooner
    assert fair["poor"].max_seen == 4
    assert fair["poor"].finish < unfair["poor"].finish - 3 * 3600
    assert fair["rich"].evictions > unfair["rich"].evictions  # the workers it gave
    # (here rich does not pay: stuck at 7 of 8 without it, it grows back to 8 once poor is done)
    assert fair["rich"].finish < unfair["rich"].finish
    assert all(j.finished for j in fair.values())
