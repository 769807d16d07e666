"""The queue-share model (``policy/sharemodel.py``): its hooks against their definitions, and the
simulator's deserved shares (``ProportionModel.fill``) against a direct water-filling."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.sharemodel import MODELS, ProportionModel, ShareModel
from elastic_controller.policy.world import build_world
from tests.harness.builders import NOW, elastic_job, gang, node, over_share, queue, snapshot_of


def progressive_fill(weights: dict[str, int], requests: dict[str, float], total: float) -> dict[str, float]:
    """Water-filling the direct way: share by weight, cap the queues that reach their request, repeat."""
    des = dict.fromkeys(weights, 0.0)
    active = [q for q in weights if requests.get(q, 0) > 0]
    remaining = total
    while active and remaining > 1e-9:
        wsum = sum(weights[q] for q in active)
        capped = [q for q in active if des[q] + remaining * weights[q] / wsum >= requests[q]]
        if not capped:
            for q in active:
                des[q] += remaining * weights[q] / wsum
            break
        for q in capped:
            remaining -= requests[q] - des[q]
            des[q] = float(requests[q])
            active.remove(q)
    return des


@given(st.dictionaries(st.sampled_from("abcdef"), st.tuples(st.integers(1, 5), st.integers(0, 64)), min_size=1),
       st.integers(0, 128))
def test_fill_is_water_filling(queues: dict[str, tuple[int, int]], total: int) -> None:
    weights = {q: w for q, (w, _) in queues.items()}
    requests = {q: float(r) for q, (_, r) in queues.items()}
    got = ProportionModel.fill(weights, requests, float(total))
    want = progressive_fill(weights, requests, float(total))
    assert got.keys() == want.keys()
    for q in got:
        assert abs(got[q] - want[q]) < 1e-6, (q, got, want)


def test_hooks_agree_with_the_shares() -> None:
    cfg = ElasticConfig()
    world = build_world(snapshot_of(*over_share(), cfg=cfg), cfg, NOW)
    m: ShareModel = world.model
    assert isinstance(m, MODELS["proportion"])
    for q, share in world.shares.items():
        deserved, allocated = share.deserved.get(m.dominant, 0), share.allocated.get(m.dominant, 0)
        assert (m.deserved(q), m.allocated(q)) == (deserved, allocated)
        assert m.reclaimable(q) == share.reclaimable
        for a in range(deserved - 1, deserved + 2):
            assert m.below_share(q, a) == (a < deserved)
            assert m.keeps_share(q, a) == (a >= deserved)
            assert m.overused(q, a) == (a > deserved)
        assert m.room(q) == m.admission_deserved(q) - allocated
        for k in range(0, 3):  # admits: the pod's dominant amount within the room left once placed is placed
            assert m.admits(q, {m.dominant: k}, {}) == (k <= m.room(q))
            assert m.admits(q, {m.dominant: k}, {q: {m.dominant: 1}}) == (k <= m.room(q) - 1)
            # the other hooks' per-resource arguments do not change proportion's answers
            assert m.below_share(q, k, {m.dominant: 5}, {"cpu": 1}) == m.below_share(q, k)
            assert m.keeps_share(q, k, [{m.dominant: 1}], {"cpu": 1}) == m.keeps_share(q, k)
        assert m.enqueue_excess(q, 2) == max(0, allocated + 2 - m.admission_deserved(q))
    # over_share: qa holds 8 of its 8 deserved, so its 2-GPU gang is 2 above what proportion admits.
    (g,) = world.waiting
    assert world.share_excess(g) == 2
    assert m.enqueue_excess("qa", 2, allocated=6) == 0


def test_unknown_queue_has_no_share() -> None:
    cfg = ElasticConfig()
    snap = snapshot_of(node("n0"), queue("qa"), *elastic_job("ns", "a", min_r=1, max_r=2, nodes=["n0"], queue="qa"),
                       *gang("ns", "g", members=1, gpus=1, queue="qa"), cfg=cfg)
    m = build_world(snap, cfg, NOW).model
    assert not m.reclaimable("nope") and not m.below_share("nope", -1) and not m.keeps_share("nope", 10**9)
    assert (m.deserved("nope"), m.allocated("nope"), m.admission_deserved("nope")) == (0, 0, 0)


def test_build_world_chooses_the_configured_model() -> None:
    from elastic_controller.policy.capacity_ledger import CapacityModel
    from elastic_controller.policy.settings import SharesConfig

    objs = [node("n0"), queue("dept", deserved={"nvidia.com/gpu": 8}),
            queue("qa", parent="dept", deserved={"nvidia.com/gpu": 2}),
            *elastic_job("ns", "a", min_r=1, max_r=2, nodes=["n0"], queue="qa")]
    proportion = ElasticConfig()
    m = build_world(snapshot_of(*objs, cfg=proportion), proportion, NOW).model
    assert isinstance(m, ProportionModel)
    flat = ElasticConfig(shares=SharesConfig(plugin="capacity"))
    m = build_world(snapshot_of(*objs, cfg=flat), flat, NOW).model
    assert isinstance(m, CapacityModel) and not m.attrs.hierarchy
    tree = ElasticConfig(shares=SharesConfig(plugin="capacity", hierarchy=True))
    m = build_world(snapshot_of(*objs, cfg=tree), tree, NOW).model
    assert isinstance(m, CapacityModel) and m.attrs.hierarchy
    assert m.attrs.queues["qa"].ancestors == ("root", "dept")
    assert m.deserved("qa") == 2  # spec.deserved as written, not water-filled
