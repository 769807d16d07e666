"""The simulator's smallest world, for unit tests of one policy knob: one node of 8 GPUs, the
default queue, a linear scaling curve and free checkpoints; each job's result by its name."""

from __future__ import annotations

import dataclasses

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.simulate.cluster import ClusterSpec, NodePool, QueueSpec
from elastic_controller.simulate.engine import SimSettings, simulate
from elastic_controller.simulate.scaling import ScalingCurve
from elastic_controller.simulate.simtypes import JobResult
from elastic_controller.simulate.trace import JobSpec
from tests.harness.legacy import legacy_config

ONE_NODE = ClusterSpec((NodePool("n", 1, 8, 96_000, 2**40),), (QueueSpec("default"),))
LINEAR = SimSettings(curve=ScalingCurve(per_doubling=1.0), checkpoint_interval=0.0)


def with_defaults(**changes: object) -> ElasticConfig:
    """The defaults as they were before issue 38 (every job elastic from its min, no limit on the min
    sets, no notice: tests/harness/legacy.py) with ``changes`` to them (``QueuePolicy`` fields): the
    one knob a test turns against that."""
    base = legacy_config()
    return dataclasses.replace(base, defaults=dataclasses.replace(base.defaults, **changes))  # type: ignore[arg-type]


def run_elastic(jobs: list[JobSpec], cfg: ElasticConfig) -> dict[str, JobResult]:
    """``jobs`` simulated under the elastic policy on ONE_NODE with LINEAR, each result by job name."""
    return {j.name: j for j in simulate(jobs, ONE_NODE, cfg, "elastic", LINEAR).jobs}
