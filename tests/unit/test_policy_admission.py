"""Admission that does not starve the waiting (issue 38, ``policy/admission.py``): a new job waits
behind the oldest waiting gang of its queue unless its gang fits beside that gang's reservation."""

from __future__ import annotations

import dataclasses

import pytest

from elastic_controller.config import ConfigError, load_config
from elastic_controller.policy.admission import (
    ADMISSION_HOLD_ELASTIC,
    ADMISSION_RESERVE,
    ADMISSION_VOLCANO,
    Gang,
    holds,
)
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimSettings, simulate
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.trace import JobSpec


def gang(key: str, at: float, need: float, *, queue: str = "q", elastic: bool = True, started: bool = False,
         admitted: bool = False, running_min: float = 0.0) -> Gang:
    return Gang(key, queue, (0, at, key), need, elastic, started, admitted, running_min)


# a running elastic job holds the queue's 8 GPUs, 2 of them its min set; a rigid gang of 4 waits since
# t=10 (the agent can take back the elastic workers for it: 6 GPUs of the queue are not min sets)
RUNNING = gang("big", 0, 2, started=True, admitted=True, running_min=2)
WAITING = gang("rigid4", 10, 4, elastic=False, admitted=True)


def held(mode: str, *later: Gang, room: float = 8) -> set[str]:
    return set(holds([RUNNING, WAITING, *later], {"q": room}, lambda q: mode))


def test_volcano_holds_nothing() -> None:
    assert held(ADMISSION_VOLCANO, gang("e", 20, 2), gang("r", 30, 2, elastic=False)) == set()


def test_reserve_holds_every_later_job_that_does_not_fit_beside() -> None:
    later = (gang("e", 20, 4), gang("r", 30, 4, elastic=False))
    assert held(ADMISSION_RESERVE, *later) == {"e", "r"}
    # holdElastic lets the rigid job through
    assert held(ADMISSION_HOLD_ELASTIC, *later) == {"e"}
    hold = holds([RUNNING, WAITING, *later], {"q": 8}, lambda q: ADMISSION_RESERVE)["e"]
    assert hold.behind == "rigid4" and "rigid4" in hold.reason and "admission: reserve" in hold.reason


def test_a_gang_that_fits_beside_the_reservation_is_backfilled() -> None:
    # 6 GPUs free of min sets: 4 reserved for rigid4, a gang of 2 fits beside, one of 4 does not
    assert held(ADMISSION_RESERVE, gang("e2", 20, 2), gang("e4", 30, 4)) == {"e4"}
    # with 16 GPUs of room, 14 are free: 4 reserved, a gang of 10 fits beside, one of 12 does not
    assert held(ADMISSION_RESERVE, gang("e10", 20, 10), gang("e12", 30, 12), room=16) == {"e12"}


def test_admitted_and_older_jobs_are_never_held() -> None:
    older = gang("older", 5, 2)  # older than the waiting gang: it is the waiting gang then
    late_admitted = gang("in", 20, 2, admitted=True)
    assert held(ADMISSION_RESERVE, older, late_admitted) == set()  # rigid4 was admitted already


def test_a_gang_that_taking_back_elastic_workers_cannot_serve_reserves_nothing() -> None:
    # 5 GPUs of room, 3 free of min sets: rigid4 waits for a job to end, not for the agent; holding
    # the jobs behind it would leave GPUs idle for as long
    assert held(ADMISSION_RESERVE, gang("e", 20, 2), room=5) == set()
    assert held(ADMISSION_RESERVE, gang("e", 20, 4), room=6) == {"e"}


def test_queues_are_independent_and_a_bad_mode_is_refused() -> None:
    other = gang("other", 20, 4, queue="p")
    modes = {"q": ADMISSION_RESERVE, "p": ADMISSION_RESERVE}
    assert set(holds([RUNNING, WAITING, other], {"q": 8, "p": 8}, modes.__getitem__)) == set()
    with pytest.raises(ValueError, match="admission must be one of"):
        holds([RUNNING, WAITING, gang("e", 20, 4)], {"q": 8}, lambda q: "fifo")


def test_the_config_key_takes_only_its_choices() -> None:
    assert load_config("defaults:\n  admission: reserve\n").defaults.admission == ADMISSION_RESERVE
    with pytest.raises(ConfigError, match="admission"):
        load_config("defaults:\n  admission: fifo\n")


# --- the simulator applies it ------------------------------------------------------------------------

ONE_NODE = ClusterSpec((NodePool("n", 1, 8, 96_000, 2**40),), (QueueSpec("default"),))
LINEAR = SimSettings(curve=ScalingCurve(per_doubling=1.0), checkpoint_interval=0.0)
# an elastic job runs 6 workers (min 4) of the node's 8 GPUs; a rigid gang of 4 arrives and waits (the
# agent can free 2 elastic workers for it, 2 GPUs are idle); a small elastic job arrives after it and
# its min set (1) fits in the idle 2 GPUs
JOBS = [JobSpec("long", 0.0, 4, 6, 1, 6 * 7200.0), JobSpec("rigid4", 10.0, 4, 4, 1, 4 * 3600.0),
        JobSpec("small", 20.0, 1, 2, 1, 2 * 3600.0)]


def _cfg(admission: str) -> ElasticConfig:
    base = ElasticConfig()
    return dataclasses.replace(base, defaults=dataclasses.replace(base.defaults, admission=admission))


def test_the_simulator_holds_a_new_job_behind_the_waiting_gang() -> None:
    before = {j.name: j for j in simulate(JOBS, ONE_NODE, _cfg(ADMISSION_VOLCANO), "elastic", LINEAR).jobs}
    after = {j.name: j for j in simulate(JOBS, ONE_NODE, _cfg(ADMISSION_RESERVE), "elastic", LINEAR).jobs}
    assert before["small"].start < before["rigid4"].start  # Volcano lets it overtake
    assert after["small"].start >= after["rigid4"].start  # held until the gang started
    # ... which then starts at once on the idle GPUs and long's 2 elastic workers, not when long ends
    assert after["rigid4"].start < before["rigid4"].start / 5  # here 330 s against 3650 s
    assert all(j.finished for j in after.values())
