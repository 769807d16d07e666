"""Issue 39, item 3: the rules that exist because a scale event restarts a job (``minScaleUpGain``,
the checkpoint window, ``minWorkersToShrink``, the cooldown and snooze) are relaxed, through
``policy.cycle.decide``, for a job whose PyTorchJob says ``volcano-elastic.io/resize: in-place``
(the queue's ``inPlace*`` keys, ``settings.QueuePolicy``). Each test puts a job resized in place and
a restart job alike in one world: the in-place one is grown or shrunk where the other is held, and
with the key set back to the rule for every job (null, or ``inPlaceWaitsForCheckpoint: true``) both
are held alike."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from elastic_controller.cli.status import build_rows
from elastic_controller.config import ConfigError, parse_config
from elastic_controller.policy import keys
from elastic_controller.policy.actions import CycleDecision, LiftGates, ShrinkInPlace
from elastic_controller.policy.cycle import decide
from elastic_controller.policy.decisions import HoldNote, HoldReason
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness.builders import NOW, ago, elastic_job, gang, node, pytorchjob, snapshot_of, ts

IN_PLACE = "tb/b-inplace"
RESTART = "ta/a-restart"  # (first in the scale-up order: the room it is denied goes to the other)
# The rules as for every job: what each relaxation is compared against.
STRICT = {"inPlaceMinScaleUpGain": None, "inPlaceMinWorkersToShrink": None, "inPlaceCooldownSeconds": None,
          "inPlaceWaitsForCheckpoint": True}


def _cfg(**defaults: Any) -> ElasticConfig:
    return ElasticConfig(defaults=QueuePolicy(**defaults))


def _pair(*, running: int, node_gpus: int, checkpoint_ago: float | None = None,
          last_scale_ago: float | None = None, direction: str = "up") -> list[Any]:
    """Two jobs alike (min 2, max 6, 1 GPU a worker), each alone on its node of ``node_gpus`` GPUs;
    ``b-inplace``'s PyTorchJob opts in to in-place resizing, ``a-restart``'s does not."""
    objs: list[Any] = []
    # each job its own tenant (namespace): minWorkersToShrink counts a tenant's workers (issue 36, T14)
    for ns, name, host in (("ta", "a-restart", "n0"), ("tb", "b-inplace", "n1")):
        objs.append(node(host, gpus=node_gpus))
        job = elastic_job(ns, name, min_r=2, max_r=6, running=running, nodes=[host],
                          last_scale=ago(last_scale_ago) if last_scale_ago is not None else None)
        pg_ann = job[0]["metadata"].setdefault("annotations", {})
        if last_scale_ago is not None:
            pg_ann[keys.LAST_SCALE_DIRECTION] = direction
        if checkpoint_ago is not None:
            pg_ann[keys.LAST_CHECKPOINT_TIME] = ts(ago(checkpoint_ago))
        tj = pytorchjob(ns, name, workers=6, min_r=2, max_r=6)
        if name == "b-inplace":
            tj["metadata"]["annotations"] = {keys.RESIZE: keys.RESIZE_IN_PLACE}
        objs += [tj, *job]
    return objs


def _decide(objs: list[Any], cfg: ElasticConfig) -> CycleDecision:
    return decide(snapshot_of(*objs, cfg=cfg), cfg, NOW)


def _grown(d: CycleDecision) -> dict[str, int]:
    return {a.job: len(a.releases) for a in d.of(LiftGates)}


def _held(d: CycleDecision) -> dict[str, str]:
    return {n.job: n.reason for n in d.plan.notes if isinstance(n, HoldNote) and n.job}


def test_a_one_worker_growth_is_worth_it_in_place_not_for_a_restart() -> None:
    # 4 of 6 running, 1 GPU free beside each: +50 % at most, below minScaleUpGain 1
    objs = _pair(running=4, node_gpus=5)
    d = _decide(objs, ElasticConfig())
    assert _grown(d) == {IN_PLACE: 2}
    assert _held(d)[RESTART] == HoldReason.BELOW_MIN_GAIN
    release = d.plan.gate_releases[0]
    assert release.in_place and release.reason.startswith("in place: ")
    assert "at least inPlaceMinScaleUpGain 0" in release.reason and "it resizes in place" in release.reason
    strict = _decide(objs, _cfg(**STRICT))
    assert _grown(strict) == {}
    held = _held(strict)
    assert held == {RESTART: HoldReason.BELOW_MIN_GAIN, IN_PLACE: HoldReason.BELOW_MIN_GAIN}
    # a queue's own value is its in-place jobs' bar: +50 % is below 0.75
    bar = _cfg(inPlaceMinScaleUpGain=0.75)
    assert _grown(_decide(objs, bar)) == {}
    note = next(n for n in _decide(objs, bar).plan.notes if isinstance(n, HoldNote) and n.job == IN_PLACE)
    assert "below inPlaceMinScaleUpGain 0.75 (not worth a resize in place)" in note


def test_an_in_place_job_does_not_wait_for_a_fresh_checkpoint_to_grow() -> None:
    # 2 GPUs free beside each (+50 %, minScaleUpGain 0.5 for both), the checkpoint 1000 s old
    objs = _pair(running=4, node_gpus=6, checkpoint_ago=1000)
    cfg = _cfg(minScaleUpGain=0.5)
    d = _decide(objs, cfg)
    assert _grown(d) == {IN_PLACE: 2}
    assert _held(d)[RESTART] == HoldReason.CHECKPOINT_TOO_OLD
    strict = _decide(objs, dataclasses.replace(cfg, defaults=dataclasses.replace(
        cfg.defaults, inPlaceWaitsForCheckpoint=True)))
    assert _grown(strict) == {}
    assert _held(strict) == {RESTART: HoldReason.CHECKPOINT_TOO_OLD, IN_PLACE: HoldReason.CHECKPOINT_TOO_OLD}
    # within the window both grow: the rule, not the world, made the difference
    assert _grown(_decide(_pair(running=4, node_gpus=6, checkpoint_ago=60), cfg)) == {RESTART: 2, IN_PLACE: 2}


@pytest.mark.parametrize("settings", [{}, {"minScaleUpGain": 0.0}])
def test_an_in_place_job_s_cooldown_and_snooze_are_its_own(settings: dict[str, Any]) -> None:
    # scaled 120 s ago: inside cooldownSeconds 300, past inPlaceCooldownSeconds 60; room to double
    for direction in ("up", "down"):
        objs = _pair(running=3, node_gpus=6, last_scale_ago=120, direction=direction)
        d = _decide(objs, _cfg(**settings))
        assert _grown(d) == {IN_PLACE: 3}, direction
        assert _held(d)[RESTART] == (HoldReason.COOLDOWN if direction == "up" else HoldReason.SNOOZED)
        strict = _decide(objs, _cfg(**settings, **STRICT))
        assert _grown(strict) == {}
        assert set(_held(strict)) == {RESTART, IN_PLACE}
    # still inside its own cooldown: held, and the note names the key
    objs = _pair(running=3, node_gpus=6, last_scale_ago=30)
    note = next(n for n in _decide(objs, _cfg(**settings)).plan.notes if isinstance(n, HoldNote) and n.job == IN_PLACE)
    assert note.reason == HoldReason.COOLDOWN and "inPlaceCooldownSeconds 60" in note


def test_a_small_in_place_job_gives_a_worker_where_a_restart_job_keeps_its_own() -> None:
    # both run 3 workers (min 2), below minWorkersToShrink 4; a starving gang needs one GPU
    objs = [*_pair(running=3, node_gpus=3), *gang("ns", "g", members=1, gpus=1)]
    d = _decide(objs, ElasticConfig())
    (shrink,) = d.of(ShrinkInPlace)
    assert {n.victim.job for n in shrink.victims} == {IN_PLACE} and len(shrink.victims) == 1
    assert all(e.job == IN_PLACE for e in d.plan.evictions)
    strict = _decide(objs, _cfg(**STRICT))
    assert strict.plan.evictions == () and strict.of(ShrinkInPlace) == ()
    (outcome,) = strict.plan.starving
    assert "below minWorkersToShrink" in outcome.reason
    # at 2 workers (its min) nobody gives: the relaxation never goes below min
    at_min = [*_pair(running=2, node_gpus=2), *gang("ns", "g", members=1, gpus=1)]
    assert _decide(at_min, ElasticConfig()).plan.evictions == ()


def test_the_keys_are_checked_and_null_means_the_rule_for_every_job() -> None:
    cfg = parse_config({"defaults": dict(STRICT), "queues": {"q": {"inPlaceMinScaleUpGain": 0.25,
                                                                   "inPlaceCooldownSeconds": 10}}})
    strict, q = cfg.defaults, cfg.queue_policy("q")
    assert (strict.min_scale_up_gain(True), strict.cooldown_seconds(True), strict.min_workers_to_shrink(True),
            strict.checkpoint_window(True)) == (1.0, 300, 4, 600)
    assert (q.min_scale_up_gain(True), q.cooldown_seconds(True), q.min_workers_to_shrink(False)) == (0.25, 10, 4)
    assert q.snooze_seconds(True) == 10 and q.snooze_seconds(False) == 300
    d = QueuePolicy()
    assert (d.min_scale_up_gain(True), d.min_workers_to_shrink(True), d.cooldown_seconds(True),
            d.checkpoint_window(True), d.checkpoint_window(False)) == (0.0, 2, 60, None, 600)
    for bad in ({"inPlaceMinScaleUpGain": -1}, {"inPlaceMinScaleUpGain": "0"}, {"inPlaceCooldownSeconds": 1.5},
                {"inPlaceMinWorkersToShrink": -2}, {"inPlaceWaitsForCheckpoint": "no"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            parse_config({"defaults": bad})


def test_status_shows_the_in_place_reason_and_cooldown() -> None:
    from tests.harness.builders import items

    objs = _pair(running=4, node_gpus=5, last_scale_ago=100)
    rows = {r["job"]: r for r in build_rows(items(*objs), ElasticConfig(), NOW)["default"]}
    assert rows[RESTART]["cooldownSeconds"] == 200 and rows[IN_PLACE]["cooldownSeconds"] == 0
    grown = rows[IN_PLACE]["gatedReason"]
    assert grown["reason"] == "Growing" and "inPlaceMinScaleUpGain 0" in grown["message"]
    assert "in place" in grown["message"]
    assert rows[RESTART]["gatedReason"]["reason"] == HoldReason.COOLDOWN


def test_plan_shows_the_in_place_reason(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from elastic_controller.cli import main
    from tests.harness.builders import dump

    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump(*_pair(running=4, node_gpus=5))))
    assert main(["plan", "--from", str(path), "--now", ts(NOW), "--output", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    releases = got["gateReleases"]
    assert releases and {r["job"] for r in releases} == {IN_PLACE} and all(r["inPlace"] for r in releases)
    assert all("inPlaceMinScaleUpGain 0" in r["reason"] for r in releases)
    assert main(["plan", "--from", str(path), "--now", ts(NOW), "--output", "table"]) == 0
    table = capsys.readouterr().out
    assert "in place" in table and "below minScaleUpGain 1 (not worth a restart)" in table


def test_a_relaxation_never_makes_a_rule_stricter() -> None:
    """An admin's shorter cooldown (the real tier's 30 s), lower gain or smaller minWorkersToShrink
    holds for in-place jobs too: they get the looser of the queue's rule and the inPlace* key (a
    job resized in place once waited the default 60 s against its queue's 30 s and never grew back)."""
    p = parse_config({"defaults": {"cooldownSeconds": 30, "minWorkersToShrink": 0, "minScaleUpGain": 0.0}}).defaults
    assert (p.cooldown_seconds(True), p.min_workers_to_shrink(True), p.min_scale_up_gain(True)) == (30, 0, 0.0)
    assert [p.key_of(k, True) for k in ("cooldownSeconds", "minWorkersToShrink", "minScaleUpGain")] == \
        ["cooldownSeconds", "minWorkersToShrink", "minScaleUpGain"]
    d = QueuePolicy()  # the defaults: each inPlace* key is the looser one
    assert (d.cooldown_seconds(True), d.min_workers_to_shrink(True), d.min_scale_up_gain(True)) == (60, 2, 0.0)
    assert d.key_of("cooldownSeconds", True) == "inPlaceCooldownSeconds"
