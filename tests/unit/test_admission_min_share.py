"""``elasticMinShare`` (``policy/admission.min_share_holds``, issue 38): the min sets of a queue's
elastic jobs may hold at most a fraction of its deserved share, so that the rigid and small jobs of
the queue are not left waiting behind min sets nobody may take back."""

from __future__ import annotations

import pytest

from elastic_controller.config import ConfigError, parse_config
from elastic_controller.policy.admission import ADMISSION_VOLCANO, Gang, holds, min_share_holds
from elastic_controller.simulate.trace import JobSpec
from tests.harness.simworld import run_elastic, with_defaults


def gang(key: str, rank: int, need: float, *, elastic: bool = True, started: bool = False,
         admitted: bool = False, running_min: float = 0.0) -> Gang:
    return Gang(key, "q", (0, float(rank), key), need, elastic, started, admitted, running_min)


def test_new_elastic_jobs_are_let_in_in_order_while_their_min_sets_fit_under_the_share() -> None:
    members = [
        gang("running", 0, 32, started=True, running_min=32),  # holds 32 with its min set
        gang("rigid-running", 1, 40, elastic=False, started=True, running_min=40),  # not counted
        gang("admitted", 2, 8, admitted=True),  # let in, not placed yet: its min set counts
        gang("a", 3, 8),  # 32 + 8 + 8 = 48 <= 50: in
        gang("b", 4, 16),  # 64 > 50: held
        gang("c", 5, 2),  # 50 <= 50: in, passing b
        gang("rigid", 6, 64, elastic=False),  # never held here
        gang("d", 7, 1),  # 51 > 50: held
    ]
    held = min_share_holds("q", members, 100, 0.5)
    assert sorted(held) == ["b", "d"]
    assert held["b"].behind == ""
    assert "elasticMinShare 0.5" in held["b"].reason and "48 of its 100" in held["b"].reason


def test_the_first_held_job_is_let_in_when_no_elastic_min_set_of_the_queue_would_be() -> None:
    # nothing of the queue's could leave room for "big" (60 > 0.5 x 100): held, it would wait forever
    assert min_share_holds("q", [gang("big", 0, 60), gang("bigger", 1, 70)], 100, 0.5) == {
        "bigger": min_share_holds("q", [gang("big", 0, 60), gang("bigger", 1, 70)], 100, 0.5)["bigger"]}
    # a rigid job running does not count: still nothing elastic could leave room
    assert list(min_share_holds("q", [gang("rigid", 0, 90, elastic=False, started=True, running_min=90),
                                      gang("big", 1, 60)], 100, 0.5)) == []
    # a later job that fits is let in: the first stays held (the queue's min sets leave room later)
    assert list(min_share_holds("q", [gang("big", 0, 60), gang("small", 1, 10)], 100, 0.5)) == ["big"]
    # an elastic min set running: held as before
    assert list(min_share_holds("q", [gang("run", 0, 4, started=True, running_min=4), gang("big", 1, 60)],
                                100, 0.5)) == ["big"]


def test_a_share_of_1_holds_nothing_and_volcano_admission_holds_nothing() -> None:
    members = [gang("running", 0, 90, started=True, running_min=90), gang("a", 1, 50)]
    assert holds(members, {"q": 100.0}, lambda _q: ADMISSION_VOLCANO) == {}
    assert holds(members, {"q": 100.0}, lambda _q: ADMISSION_VOLCANO, lambda _q: 1.0) == {}
    assert list(holds(members, {"q": 100.0}, lambda _q: ADMISSION_VOLCANO, lambda _q: 0.9)) == ["a"]
    assert holds(members, {}, lambda _q: ADMISSION_VOLCANO, lambda _q: 0.5) == {}  # no room known: none


# One node of 8 GPUs (tests/harness/simworld.ONE_NODE). big1 and big2 are elastic (min 4, max 8) and
# long; rigid (1 worker of 1 GPU) arrives after both. Without the share big2's min set and big1's take
# all 8 GPUs until one of them ends; with elasticMinShare 0.5 (4 GPUs) big2 is held and rigid gets a
# GPU from big1's elastic workers.
JOBS = [JobSpec("big1", 0.0, 4, 8, 1, 8 * 20_000.0), JobSpec("big2", 100.0, 4, 8, 1, 8 * 20_000.0),
        JobSpec("rigid", 600.0, 1, 1, 1, 3_600.0)]


def test_the_simulator_holds_a_min_set_that_would_pass_the_share() -> None:
    before = run_elastic(JOBS, with_defaults())
    capped = run_elastic(JOBS, with_defaults(elasticMinShare=0.5))
    assert before["big2"].start < 1_000  # at its min beside big1
    assert before["rigid"].start >= before["big1"].finish - 1 or before["rigid"].start >= before["big2"].finish - 1
    assert capped["big2"].start >= capped["big1"].finish - 1  # held while big1's min set holds the share
    assert capped["rigid"].start < 1_800  # big1's elastic workers make room for it
    assert capped["rigid"].finish < before["rigid"].finish


def test_the_key_is_validated() -> None:
    assert parse_config({"defaults": {"elasticMinShare": 0.5}}).defaults.elasticMinShare == 0.5
    assert parse_config({"queues": {"a": {"elasticMinShare": 1}}}).queue_policy("a").elasticMinShare == 1.0
    for bad in (0, -0.5, 1.5, "half", True):
        with pytest.raises(ConfigError, match="elasticMinShare"):
            parse_config({"defaults": {"elasticMinShare": bad}})
