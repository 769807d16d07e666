"""The restart cost model (issue 29.6): what a scale event stalls a job, by the event."""

from __future__ import annotations

import dataclasses

import pytest

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimSettings, simulate
from elastic_controller.simulate.restarts import RestartCost, describe, fixed_cost
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.trace import JobSpec
from tests.harness.legacy import legacy_policy

TORCHRUN = RestartCost(model="torchrun", restart=25.0)
KIT = RestartCost(model="kit", restart=25.0)


def test_torchrun_a_scale_down_below_max_costs_more_than_a_grow_to_max() -> None:
    shrink = TORCHRUN.seconds(True, 3, 4)
    grow_to_max = TORCHRUN.seconds(False, 4, 4)
    grow_below = TORCHRUN.seconds(False, 3, 4)
    # detection + keep-alive + last call + restart; detection + the round itself + restart
    assert shrink == pytest.approx(1.5 + 12.5 + 30.0 + 25.0)
    assert grow_to_max == pytest.approx(1.5 + 0.5 + 25.0)
    assert grow_below == pytest.approx(1.5 + 30.0 + 25.0)
    assert shrink > grow_below > grow_to_max
    # the last call is the job's last_call_timeout (rdzvConf)
    assert dataclasses.replace(TORCHRUN, last_call=5.0).seconds(False, 3, 4) == pytest.approx(grow_below - 25.0)


def test_the_kit_removes_the_last_call_and_the_keepalive() -> None:
    assert KIT.seconds(False, 3, 4) == KIT.seconds(False, 4, 4) == TORCHRUN.seconds(False, 4, 4)
    # below max the kit waits only for the round itself, as torchrun does at max
    assert TORCHRUN.seconds(False, 3, 4) - KIT.seconds(False, 3, 4) == pytest.approx(TORCHRUN.last_call - KIT.at_max)
    assert KIT.seconds(True, 3, 4) == pytest.approx(1.5 + 5.0 + 0.5 + 25.0)
    assert KIT.seconds(True, 3, 4) < TORCHRUN.seconds(True, 3, 4) - TORCHRUN.last_call


def test_the_fixed_model_is_the_old_penalty_whatever_the_event() -> None:
    fixed = fixed_cost(60)
    assert {fixed.seconds(r, n, 4) for r in (True, False) for n in (2, 4)} == {60.0}
    assert "60s" in describe(fixed) and "fixed" in describe(fixed)
    assert "shrink 69s" in describe(TORCHRUN) and "grow to max 27s" in describe(TORCHRUN)


@pytest.mark.parametrize("bad", [{"model": "slurm"}, {"restart": -1.0}, {"last_call": -5.0}])
def test_bad_models_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="restart cost"):
        RestartCost(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("cost", "a_finish", "stalls"), [
    # A (1..2 workers of 4 GPUs) grows at 0 in its first rendezvous; B (rigid, 4 GPUs) arrives at 200 and A's
    # elastic worker is evicted at 300 (cooldown): A shrinks 2 -> 1 (below max), then regrows to max at 1330
    # when B ends. torchrun: the shrink stalls 1.5 + 12.5 + 30 + 25 = 69 s: 2400 done by 300, 4 x 961 by 1330,
    # 1756 left at 8 from 1330 + 27 (the grow to max): done at 1576.5.
    (TORCHRUN, 1576.5, 69.0 + 27.0),
    # kit: the shrink stalls 1.5 + 5 + 0.5 + 25 = 32 s: 4 x 998 by 1330, 1608 left at 8 from 1357: 1558.
    (KIT, 1558.0, 32.0 + 27.0),
    # fixed 60: the engine test's hand-computed trajectory (test_eviction_waits_for_cooldown_and_grace)
    (fixed_cost(60), 1605.0, 120.0),
], ids=["torchrun", "kit", "fixed"])
def test_the_engine_stalls_each_event_by_its_cost(cost: RestartCost, a_finish: float, stalls: float) -> None:
    spec = ClusterSpec((NodePool("n", 1, 8, 96_000, 2**40),), (QueueSpec("default"),))
    jobs = [JobSpec("a", 0, 1, 2, 4, 8000), JobSpec("b", 200, 1, 1, 4, 4000)]
    settings = SimSettings(curve=ScalingCurve(1.0), checkpoint_interval=0, restart_cost=cost)
    r = simulate(jobs, spec, ElasticConfig(defaults=legacy_policy(minWorkersToShrink=0)), "elastic", settings)
    a, b = r.jobs
    assert [d for _, d in a.scale_events] == ["up", "down", "up"]
    assert (a.start, a.finish, a.restarts) == (0.0, pytest.approx(a_finish), 2)
    assert a.restart_seconds == pytest.approx(stalls)
    assert (b.start, b.finish, b.restart_seconds) == (330.0, 1330.0, 0.0)


def test_the_default_is_torchrun_with_a_gpu_restart() -> None:
    assert SimSettings().restart_cost == TORCHRUN


def _flags(*argv: str) -> RestartCost | str:
    import argparse

    from elastic_controller.cli import simulate as cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return cli._restart_cost(parser.parse_args(list(argv)))


def test_the_cli_flags_pick_the_model() -> None:
    assert _flags() == TORCHRUN
    assert _flags("--restart-cost-model", "kit", "--restart-seconds", "12") == RestartCost(model="kit", restart=12.0)
    assert _flags("--last-call-timeout", "5") == RestartCost(restart=25.0, last_call=5.0)
    # --restart-penalty keeps working: the fixed model
    assert _flags("--restart-penalty", "45") == fixed_cost(45)
    assert _flags("--restart-cost-model", "fixed", "--restart-seconds", "45") == fixed_cost(45)
    assert "not with --restart-cost-model kit" in str(_flags("--restart-penalty", "60", "--restart-cost-model", "kit"))
    assert "twice" in str(_flags("--restart-penalty", "60", "--restart-seconds", "30"))
