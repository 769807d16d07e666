"""Issue 39, item 3, in the simulator: the jobs the cost model resizes in place
(``RestartCost.in_place_fraction``) are the jobs the simulated agent's policy knows as such (their
PyTorchJob says ``resize: in-place``), so the queue's ``inPlace*`` rules apply to them: a growth by one
worker, below ``minScaleUpGain``, happens for them, and costs seconds, not a restart."""

from __future__ import annotations

import dataclasses

from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimSettings, simulate
from elastic_controller.simulate.restarts import fixed_cost
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.simtypes import JobResult
from elastic_controller.simulate.trace import JobSpec

CLUSTER = ClusterSpec((NodePool("n", 1, 8, 96_000, 2**40),), (QueueSpec("default"),))
# b (one GPU) ends at about 1000 s; a (4 to 8 workers of one GPU) gets 7 in its first rendezvous, and
# its 8th worker fits once b is gone: +14 %, far below minScaleUpGain 1.
JOBS = [JobSpec("b", 0, 1, 1, 1, 1000), JobSpec("a", 0, 4, 8, 1, 200_000)]
SETTINGS = SimSettings(curve=ScalingCurve(1.0), checkpoint_interval=600, restart_cost=fixed_cost(60))
IN_PLACE = dataclasses.replace(SETTINGS, restart_cost=dataclasses.replace(fixed_cost(60), in_place_fraction=1.0,
                                                                           in_place=2.0))
STRICT = ElasticConfig(defaults=QueuePolicy(inPlaceMinScaleUpGain=None, inPlaceMinWorkersToShrink=None,
                                            inPlaceCooldownSeconds=None, inPlaceWaitsForCheckpoint=True))


def _a(settings: SimSettings, cfg: ElasticConfig) -> JobResult:
    return next(j for j in simulate(JOBS, CLUSTER, cfg, "elastic", settings).jobs if j.name == "a")


def test_the_policy_grows_a_job_resized_in_place_by_one_worker() -> None:
    restart = _a(SETTINGS, ElasticConfig())
    assert restart.max_seen == 7 and restart.restarts == 0  # the +14 % was not worth a restart
    held = _a(IN_PLACE, STRICT)  # resized in place, but the rule as for every job
    assert held.max_seen == 7 and held.finish == restart.finish
    grown = _a(IN_PLACE, ElasticConfig())  # the default: inPlaceMinScaleUpGain 0
    assert grown.max_seen == 8 and grown.scale_events == (*held.scale_events, (1000.0, "up"))  # once b ended
    # the event cost the in-place seconds, nothing was redone, and the job finished sooner
    assert grown.restarts == 0 and grown.lost_work == 0.0 and grown.restart_seconds == 2.0
    assert grown.finish < held.finish
