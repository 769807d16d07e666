"""The simulator applies the cycle's restart decisions (``decide``'s ``SpendRestart``): with
``SimSettings.max_restarts`` every job's PyTorchJob is in the planner's snapshot with that
``elasticPolicy.maxRestarts``, each shrink counts one in ``restarts-used``, and the policy's restart
budget (policy/budget.py: one restart kept in reserve) stops shrinking a job whose budget is spent.
Without it (the default) no PyTorchJob is there and the rule does not apply, as before."""

from __future__ import annotations

from importlib.resources import files

import pytest

from elastic_controller.simulate.cluster import parse_cluster
from elastic_controller.simulate.engine import SimResult, SimSettings, simulate
from elastic_controller.simulate.generate import GeneratorOptions, generate
from tests.harness.legacy import legacy_config


def _run(max_restarts: int | None) -> SimResult:
    base = files("elastic_controller") / "examples" / "sim"
    cluster = parse_cluster(base.joinpath("cluster.yaml").read_text(encoding="utf-8"), "<example>/cluster.yaml")
    jobs = generate(cluster, GeneratorOptions(jobs=80, seed=1, load=1.5))
    return simulate(jobs, cluster, legacy_config(), "elastic", SimSettings(max_restarts=max_restarts))


def _shrinks(r: SimResult) -> list[int]:
    return [sum(1 for _, direction in j.scale_events if direction == "down") for j in r.jobs]


def test_without_pytorchjobs_jobs_shrink_again_and_again() -> None:
    assert max(_shrinks(_run(None))) >= 3  # what the budget is there to stop


@pytest.mark.parametrize("max_restarts", [2, 3])
def test_a_job_shrinks_at_most_its_budget_less_the_reserve(max_restarts: int) -> None:
    r = _run(max_restarts)
    shrinks = _shrinks(r)
    assert max(shrinks) <= max_restarts - 1  # one restart kept for a failure that is not ours
    assert sum(shrinks) > 0 and r.rejected_decisions == ()
    assert all(j.finish > 0 for j in r.jobs)
