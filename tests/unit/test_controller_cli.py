"""``status`` and ``release-gates`` on plain objects."""

from __future__ import annotations

from elastic_controller.cli.release_gates import select
from elastic_controller.cli.status import build_rows, render
from elastic_controller.policy.settings import ElasticConfig, QueuePolicy
from tests.harness import builders as b

GATE = "volcano-elastic.io/scale-up"


def test_status_rows_per_queue() -> None:
    objs = b.items(
        b.node("n1"), b.queue("default"), b.queue("vision"),
        b.pytorchjob("ns", "a", workers=6, min_r=2, max_r=6, queue="vision"),
        b.elastic_job("ns", "a", min_r=2, max_r=6, nodes=["n1"], running=4, queue="vision",
                      last_scale=b.ago(100)),
        b.gang("other", "g", members=4, gpus=2),
    )
    cfg = ElasticConfig(queues={"vision": QueuePolicy(cooldownSeconds=600)})
    rows = build_rows(objs, cfg, b.NOW)
    a = rows["vision"][0]
    assert (a["job"], a["min"], a["current"], a["max"], a["fulfillment"]) == ("ns/a", 2, 4, 6, 0.5)
    assert a["cooldownSeconds"] == 500 and a["gated"] == 2
    g = rows["default"][0]
    assert g["job"] == "other/g" and g["starving"] == 4 and g["lastDecision"].startswith("now: ")
    text = render(rows)
    assert "QUEUE vision" in text and "ns/a" in text and "500s" in text


def test_release_selects_our_gate_and_skips_finished_jobs() -> None:
    done = b.pytorchjob("ns", "done", workers=4, min_r=2, max_r=4)
    done["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    pods = b.items(b.elastic_job("ns", "a", min_r=2, max_r=4, nodes=["n1"], running=2),
                   b.elastic_job("ns", "done", min_r=2, max_r=4, nodes=["n1"], running=2),
                   b.elastic_job("ns2", "c", min_r=1, max_r=2, nodes=["n1"], running=1))
    pods = [p for p in pods if p["kind"] == "Pod"]
    other = b.job_pod("ns", "a", "worker", 9, nnodes="2:4", gates=["example.com/x"])
    chosen, skipped = select([*pods, other], [done], GATE, None, None)
    assert chosen == ["ns/a-worker-2", "ns/a-worker-3", "ns2/c-worker-1"]
    assert skipped == ["ns/done-worker-2", "ns/done-worker-3"]
    assert select(pods, [], GATE, None, "ns2/c")[0] == ["ns2/c-worker-1"]
    assert select(pods, [], GATE, "ns2", None)[0] == ["ns2/c-worker-1"]


def test_status_names_the_share_model() -> None:
    text = render({}, shares="capacity (hierarchical) (matches volcano-system/volcano-scheduler-configmap)")
    assert text.splitlines()[0] == "SHARES capacity (hierarchical) (matches volcano-system/volcano-scheduler-configmap)"
    assert "no elastic jobs or waiting gangs" in text
    assert not render({}).startswith("SHARES")


def test_status_marks_adopted_jobs() -> None:
    """Pods created before the webhook (no group annotation) count by their labels and mark the job."""
    job = b.elastic_job("ns", "a", min_r=2, max_r=6, nodes=["n1"], running=4)
    for o in job:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            o["metadata"]["annotations"].pop("scheduling.k8s.io/group-name")
    objs = b.items(b.node("n1"), b.queue("default"), b.pytorchjob("ns", "a", workers=6, min_r=2, max_r=6), job,
                   b.elastic_job("ns", "fresh", min_r=1, max_r=2, nodes=["n1"], running=1))
    rows = {r["job"]: r for r in build_rows(objs, ElasticConfig(), b.NOW)["default"]}
    a = rows["ns/a"]
    assert (a["current"], a["adoptedPods"], a["gated"]) == (4, 4, 2)
    assert rows["ns/fresh"]["adoptedPods"] == 0
    text = render({"default": list(rows.values())})
    assert "ns/a (adopted)" in text and "ns/fresh (adopted)" not in text
    assert "restart them at a quiet moment" in text
