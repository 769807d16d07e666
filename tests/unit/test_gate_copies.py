"""A scale-up's stamp and its copy on the PyTorchJob (issue 36, item 3): the PodGroup's stamp first
(compare-and-swap), then the gates, then the final ``last-decision`` with, alongside, the job's copy
(for people; never read by a decision): one round less before the gates. A scale-up that lifted
nothing writes no copy (its stamp is taken back)."""

from __future__ import annotations

from elastic_controller.agent import Agent
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import PODGROUPS, PYTORCHJOBS, Resource
from elastic_controller.policy import keys
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.agentworld import gate_world
from tests.harness.fakecluster import Clock, fake_kube


def writes(kube: FakeKube) -> list[tuple[str, str]]:
    return [(c[0], c[1]) for c in kube.calls if c[0].startswith("patch") and not c[4]]


def run(kube: FakeKube) -> None:
    Agent(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube), clock=Clock()).run_cycle()


def test_the_jobs_copy_goes_out_after_the_gates() -> None:
    kube = fake_kube(gate_world())
    run(kube)
    order = writes(kube)
    gates = [i for i, w in enumerate(order) if w[1] == "pods"]
    copy = order.index(("patch-merge", "pytorchjobs"))
    assert len(gates) == 3 and order[0] == ("patch-merge", "podgroups")  # the stamp first
    assert copy > max(gates)  # old code: right after the stamp, before any gate
    job = kube.get(PYTORCHJOBS, "j", "ns")["metadata"]["annotations"]
    pg = kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"]
    assert job[keys.LAST_SCALE_TIME] == pg[keys.LAST_SCALE_TIME] == b.ts(b.NOW)
    assert job[keys.SCALE_RECORD] == pg[keys.SCALE_RECORD]


def test_a_scale_up_that_lifted_nothing_writes_no_copy() -> None:
    kube = fake_kube(gate_world())

    def refuse(verb: str, res: Resource, ns: str, name: str, dry_run: bool) -> None:
        if res.plural == "pods" and verb.startswith("patch"):
            raise KubeError(f"injected: gate of {name} not lifted", 500)

    kube.faults.append(refuse)
    run(kube)
    assert ("patch-merge", "pytorchjobs") not in writes(kube)
    pg = kube.get(PODGROUPS, "j", "ns")["metadata"].get("annotations") or {}
    assert keys.SCALE_RECORD not in pg  # the stamp taken back
