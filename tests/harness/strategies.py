"""Hypothesis strategies of whole clusters (nodes, queues, jobs at every stage) for the policy core's
property tests, and the parse that turns one into a Snapshot."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from elastic_controller.policy.keys import WORKER_COUNTS, WORKER_STEP
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.parse import parse_objects
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness.builders import ago, job_pod, node, pod, podgroup, priority_class, queue
from tests.harness.legacy import LEGACY

GPU = "nvidia.com/gpu"
GATE = "volcano-elastic.io/scale-up"
TOLERATE = [{"key": "dedicated", "operator": "Exists"}]


# PROPERTY_EXAMPLES=2000 for a deeper hunt; the default keeps the file well under a minute. The
# default run draws the same examples every time (derandomize: a CI run fails or passes the same way
# as the run before it); PROPERTY_RANDOM=1 draws new ones (a hunt), as a developer's deeper run should.
SETTINGS = settings(max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow],
                    derandomize=os.environ.get("PROPERTY_RANDOM", "") != "1")


@st.composite
def worker_sizes(draw: st.DrawFn, min_r: int, max_r: int) -> dict[str, str]:
    """The job contract's allowed counts for a job with Worker bounds [min_r, max_r]: none (most jobs),
    a step, or a list of counts holding min (sometimes not max, sometimes a typo the planner must
    treat as "never resized")."""
    kind = draw(st.sampled_from(["", "", "", "step", "counts", "counts", "bad"]))
    if kind == "step":
        return {WORKER_STEP: str(draw(st.integers(1, 4)))}
    if kind == "counts":
        rest = draw(st.lists(st.integers(min_r + 1, max_r), max_size=3)) if max_r > min_r else []
        return {WORKER_COUNTS: ",".join(map(str, sorted({min_r, *rest})))}
    if kind == "bad":
        return {WORKER_COUNTS: draw(st.sampled_from(["two", "0", ""]))}
    return {}


@st.composite
def clusters(draw: st.DrawFn, priorities: st.SearchStrategy[list[int]] | None = None,
             ) -> tuple[list[dict[str, Any]], ElasticConfig]:
    """A random small cluster. ``priorities``: PriorityClass values to draw from (each becomes a class
    jobs and gangs pick from), instead of the fixed "low" (10) and "high" (1000)."""
    if priorities is None:
        objs: list[dict[str, Any]] = [priority_class("low", 10), priority_class("high", 1000)]
        job_classes, gang_classes = ["", "", "low", "high"], ["", "low", "high", "high"]
        filler_classes = ["", "low"]
    else:
        values = draw(priorities)
        objs = [priority_class(f"p{i}", v) for i, v in enumerate(values)]
        job_classes = gang_classes = ["", *(f"p{i}" for i in range(len(values)))]
        filler_classes = ["", "p0"]
    free: dict[str, int] = {}
    for i in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([4, 8, 8]))
        taints = []
        if draw(st.integers(0, 5)) == 0:
            taints = [{"key": "dedicated", "value": "x",
                       "effect": draw(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]))}]
        objs.append(node(f"n{i}", gpus=gpus, labels={"zone": draw(st.sampled_from("ab"))}, taints=taints,
                         unschedulable=draw(st.integers(0, 11)) == 0))
        free[f"n{i}"] = gpus
    for q in ("q1", "q2"):
        deserved = {GPU: draw(st.integers(0, 12))} if draw(st.booleans()) and draw(st.booleans()) else None
        objs.append(queue(q, weight=draw(st.integers(1, 3)), reclaimable=draw(st.integers(0, 3)) > 0,
                          deserved=deserved))
    gang_names = [f"g{i}" for i in range(draw(st.integers(1, 3)))]

    for j in range(draw(st.integers(1, 5))):
        name = f"j{j}"
        min_r = draw(st.integers(1, 3))
        max_r = min_r + draw(st.sampled_from([0, 1, 2, 3, 4, 6, 6]))
        gpus = draw(st.integers(1, 2))
        master = draw(st.booleans())
        running = draw(st.one_of(st.just(max_r), st.integers(min_r, max_r)))
        q = draw(st.sampled_from(["q1", "q2"]))
        pc = draw(st.sampled_from(job_classes))
        last = draw(st.sampled_from([None, None, None, 60, 1000]))
        objs.append(podgroup("ns", name, min_r + int(master), q, pc, ago(last) if last is not None else None,
                             created=ago(7200), annotations=draw(worker_sizes(min_r, max_r))))
        nn = f"{min_r}:{max_r}"
        members = ([("master", 0)] if master else []) + [("worker", i) for i in range(max_r)]
        for rtype, idx in members:
            kw: dict[str, Any] = {"gpus": gpus, "created": ago(7200), "tolerations": TOLERATE}
            want_running = rtype == "master" or idx < running
            fits = sorted(n for n, f in free.items() if f >= gpus)
            if want_running and fits:
                n = draw(st.sampled_from(fits))
                free[n] -= gpus
                kw.update(node_name=n, scheduled_at=ago(draw(st.sampled_from([30, 3600, 3600, 3600]))))
                if rtype == "worker" and idx >= min_r and draw(st.integers(0, 5)) == 0:
                    kw["deleting"] = True
                    kw["annotations"] = {"volcano-elastic.io/evicted-for": f"ns/{draw(st.sampled_from(gang_names))}"}
            elif rtype == "worker" and idx >= min_r and max_r > min_r:
                kw["gates"] = [GATE]
            else:
                kw["unschedulable_since"] = ago(draw(st.sampled_from([5, 600])))
            objs.append(job_pod("ns", name, rtype, idx, nnodes=nn, master_replica=master, **kw))

    if draw(st.integers(0, 3)) > 0:  # a filler job: elastic 1-GPU workers soak up every free GPU
        left = sorted(n for n, f in free.items() for _ in range(f))
        if left:
            q = draw(st.sampled_from(["q1", "q2"]))
            objs.append(podgroup("ns", "fill", 1, q, draw(st.sampled_from(filler_classes)), created=ago(7200)))
            nn = f"1:{len(left) + 2}"
            for idx, n in enumerate(left):
                objs.append(job_pod("ns", "fill", "worker", idx, nnodes=nn, gpus=1, node_name=n,
                                    scheduled_at=ago(3600), created=ago(7200), tolerations=TOLERATE))
            for idx in (len(left), len(left) + 1):
                objs.append(job_pod("ns", "fill", "worker", idx, nnodes=nn, gpus=1, gates=[GATE],
                                    created=ago(7200)))
            free = dict.fromkeys(free, 0)

    for name in gang_names:
        members = draw(st.integers(1, 3))
        gpus = draw(st.sampled_from([1, 2, 2, 3, 4, 4, 6, 8]))
        since = ago(draw(st.sampled_from([5, 600, 900, 1200])))
        objs.append(podgroup("ns", name, members, draw(st.sampled_from(["q1", "q2"])),
                             draw(st.sampled_from(gang_classes)), created=since))
        selector = {"zone": draw(st.sampled_from("ab"))} if draw(st.integers(0, 3)) == 0 else None
        tol = TOLERATE if draw(st.booleans()) else []
        for i in range(members):
            objs.append(pod("ns", f"{name}-{i}", group=name, gpus=gpus, created=since, unschedulable_since=since,
                            node_selector=selector, tolerations=tol))

    defaults = QueuePolicy(
        **LEGACY,  # the scenarios were written for every job elastic from its min, evicted at once
        cooldownSeconds=300,
        minRuntimeSeconds=draw(st.sampled_from([0, 120])),
        starvationSeconds=30,
        maxEvictionsPerCycle=draw(st.sampled_from([0, 1, 2, 4, 8, 16, 16])),
        maxScaleUpPerCycle=draw(st.integers(0, 4)),
        preemptDuringCooldown=draw(st.integers(0, 3)) == 0,
        minScaleUpGain=draw(st.sampled_from([0.0, 0.5, 1.0])),
        minWorkersToShrink=draw(st.sampled_from([0, 0, 3, 4])),  # mostly 0: small jobs give too
        fairnessWhileGangsWait=draw(st.booleans()),  # issue 38: gangs decided "wait" do not stop it
    )
    return objs, ElasticConfig(defaults=defaults)


def parse(objs: list[dict[str, Any]], cfg: ElasticConfig) -> Snapshot:
    snap, warnings = parse_objects(objs, cfg)
    assert not warnings, warnings
    return snap
