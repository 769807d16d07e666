"""Regenerate the bundled plan examples: ``python examples/plan/make_examples.py``.

Each ``<name>.json`` is a kubectl-style List (as ``kubectl get nodes,pods,podgroups,queues,
priorityclasses,pytorchjobs -A -o json`` prints it); ``<name>.expected.json`` is the plan
``volcano-elastic plan --from <name>.json --now 2026-01-01T13:00:00Z --output json`` prints,
reviewed by hand (see the story of each example below and in README.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.harness.builders import (  # noqa: E402
    NOW,
    ago,
    dump,
    elastic_job,
    gang,
    job_pod,
    node,
    podgroup,
    priority_class,
    pytorchjob,
    queue,
)

NODES = [f"gpu-{i}" for i in range(4)]


def base() -> list[object]:
    return [*(node(n) for n in NODES), queue("vision", weight=1), queue("nlp", weight=1),
            priority_class("research", 100)]


def examples() -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    # 1. Job A (vision, 2..16 workers of 2 GPUs) fills the cluster; job B (nlp) needs 4 pods x 2 GPUs.
    #    A's four highest-index elastic workers make room; A keeps 12 >= min.
    b_since = ago(120)
    b = [podgroup("team-nlp", "bert", 4, "nlp", created=b_since)]
    b += [job_pod("team-nlp", "bert", "worker", i, nnodes="4", gpus=2, created=b_since,
                  unschedulable_since=b_since) for i in range(4)]
    out["scale-down-for-gang"] = dump(base(), elastic_job("team-vision", "resnet", min_r=2, max_r=16, gpus=2,
                                                          nodes=NODES, queue="vision"), b)
    # 2. The same, but A scaled 100 s ago (cooldown 300 s): nothing may be evicted, B waits.
    out["cooldown-blocks-eviction"] = dump(base(), elastic_job("team-vision", "resnet", min_r=2, max_r=16, gpus=2,
                                                               nodes=NODES, queue="vision", last_scale=ago(100)), b)
    # 3. Idle GPUs: A runs at min (2 of 2..16) with its elastic workers gated; it grows to 8 in one
    #    scale event (all that its queue's share admits), least fulfilled job first; gpt (3 of 4)
    #    could take 4 more GPUs but +33 % is below minScaleUpGain (1): not worth a restart.
    out["scale-up-into-idle-gpus"] = dump(base(), elastic_job("team-vision", "resnet", min_r=2, max_r=16, gpus=2,
                                                              nodes=NODES, queue="vision", running=2),
                                          elastic_job("team-nlp", "gpt", min_r=1, max_r=4, gpus=4,
                                                      nodes=NODES[2:], queue="nlp", running=3))
    # 4. A plain Volcano gang (not a PyTorchJob) waited 10 s only: not starving yet (30 s), and
    #    because evicting elastic workers could place it, no gate is lifted meanwhile.
    out["not-starving-yet-holds-scale-up"] = dump(
        base(),
        elastic_job("team-vision", "resnet", min_r=2, max_r=16, gpus=2, nodes=NODES, queue="vision", running=14),
        gang("team-nlp", "mpi-sim", members=2, gpus=8, queue="nlp", waiting_since=ago(10)),
    )
    # 5. Victims already terminating for B: B waits for them, no new victims.
    victims = elastic_job("team-vision", "resnet", min_r=2, max_r=16, gpus=2, nodes=NODES, queue="vision")
    for obj in victims:
        meta = obj["metadata"]
        if obj["kind"] == "Pod" and meta["name"].rsplit("-", 1)[1] in ("15", "14", "13", "12"):
            meta["deletionTimestamp"] = "2026-01-01T12:59:50Z"
            meta["annotations"]["volcano-elastic.io/evicted-for"] = "team-nlp/bert"
    out["evictions-in-flight"] = dump(base(), victims, b)
    # 6. Vision grew past its deserved share (16 of 32 GPUs, as Volcano counts it with nlp's gated
    #    pods requested): its new gang vit fits on free GPUs, but Volcano's proportion plugin would
    #    not place it. Four of vision's own elastic workers make room in its share; nlp's gated pods
    #    grow around vit's room.
    vit_since = ago(120)
    vit = [podgroup("team-vision", "vit", 2, "vision", created=vit_since)]
    vit += [job_pod("team-vision", "vit", "worker", i, nnodes="2", gpus=2, created=vit_since,
                    unschedulable_since=vit_since) for i in range(2)]
    out["own-queue-over-share"] = dump(
        base(),
        elastic_job("team-vision", "resnet", min_r=2, max_r=16, gpus=2, nodes=NODES, queue="vision", running=10),
        elastic_job("team-nlp", "gpt", min_r=1, max_r=4, gpus=4, nodes=NODES[3:], queue="nlp", running=1),
        vit,
    )
    # 7. A department tree (Volcano's capacity plugin, hierarchy: department-tree.config.yaml): the
    #    research department may hold 24 of the 32 GPUs; its best-effort scratch queue fills all 24.
    #    vision (in research, deserved 8) starts a 4 x 2 GPU gang: it fits on the 8 idle GPUs, but
    #    Volcano would not place it beyond research's capability, so four of scratch's elastic
    #    workers (the sibling filling the department) make room; vision may reclaim (within deserved).
    bert_since = ago(120)
    bert = [podgroup("team-vision", "bert", 4, "vision", created=bert_since)]
    bert += [job_pod("team-vision", "bert", "worker", i, nnodes="4", gpus=2, created=bert_since,
                     unschedulable_since=bert_since) for i in range(4)]
    out["department-tree"] = dump(
        [*(node(n) for n in NODES), queue("research", capability={"nvidia.com/gpu": 24}),
         queue("vision", parent="research", deserved={"nvidia.com/gpu": 8}), queue("scratch", parent="research")],
        elastic_job("team-scratch", "sweep", min_r=2, max_r=12, gpus=2, nodes=NODES, queue="scratch"),
        bert,
    )
    # 8. The restart budget: the scale-down-for-gang cluster, but resnet's PyTorchJob gives torchrun
    #    maxRestarts 3 and two of them are used already (restarts-used 2, two earlier shrinks). A third
    #    shrink would leave no restart for a failure that is not ours: resnet is no victim, and bert's
    #    reason says so.
    spent = pytorchjob("team-vision", "resnet", workers=16, min_r=2, max_r=16, gpus=2, queue="vision",
                       max_restarts=3)
    spent["metadata"]["annotations"] = {"volcano-elastic.io/restarts-used": "2"}  # the copy, for people
    resnet = elastic_job("team-vision", "resnet", min_r=2, max_r=16, gpus=2, nodes=NODES, queue="vision")
    for o in resnet:  # the count the agent reads: its PodGroup's (the job's copy is its owner's to write)
        if o["kind"] == "PodGroup":
            o["metadata"]["annotations"] = {"volcano-elastic.io/restarts-used": "2"}
    out["restart-budget-spent"] = dump(base(), resnet, spent, b)
    # 9. A lost node: gpu-3's kubelet stopped (Ready is Unknown). resnet (2..4 workers of 4 GPUs) ran
    #    workers 0 and 3 there: ghosts until the node lifecycle controller evicts them; workers 1 and 2
    #    run on gpu-0. bert (nlp, one 4-GPU pod) waits for room. Counting its ghosts, resnet would look
    #    4 strong and give worker 2 (evicting worker 3 frees nothing on a node that takes no pods),
    #    leaving 1 live worker, below its min. Counting live workers only, it runs 2: its min (and
    #    below minWorkersToShrink); worker 3 is no victim either, and bert's reason says where it is.
    lost = [node(n) for n in NODES[:3]] + [node(NODES[3], ready=False)]
    lost[3]["status"]["conditions"] = [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                        "message": "Kubelet stopped posting node status."}]
    small = [podgroup("team-nlp", "bert", 1, "nlp", created=b_since),
             job_pod("team-nlp", "bert", "worker", 0, nnodes="1", gpus=4, created=b_since,
                     unschedulable_since=b_since)]
    out["lost-node-ghosts"] = dump(
        lost, queue("vision", weight=1), queue("nlp", weight=1),
        elastic_job("team-vision", "resnet", min_r=2, max_r=4, gpus=4, nodes=[NODES[3], NODES[0], NODES[0], NODES[3]],
                    queue="vision"),
        elastic_job("team-vision", "gpt", min_r=2, max_r=2, gpus=8, nodes=NODES[1:3], queue="vision"),
        small)
    return out


CONFIGS = {"department-tree": "shares: {plugin: capacity, hierarchy: true}\n"}
"""Examples planned with a configuration of their own (``<name>.config.yaml``, ``plan --config``)."""


def main() -> None:
    for name, doc in examples().items():
        (HERE / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    for name, text in CONFIGS.items():
        (HERE / f"{name}.config.yaml").write_text(text)
    print(f"wrote {len(examples())} examples to {HERE} (plan them at --now {NOW.isoformat()})")


if __name__ == "__main__":
    main()
