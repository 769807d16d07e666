"""Fuzz: malformed and mutated AdmissionReviews through the Flask app (5,000 cases in all, about 6,500 requests).

Every answer is 200 with a well-formed AdmissionReview response whose patch applies to the
object under review, or 400 with a JSON reason; never a 500.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_controller.policy.settings import ElasticConfig
from tests.harness.webhook_objects import decode_patch, job, pod, review
from webhook.app import create_app

FUZZ = settings(max_examples=2500, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

CLIENT: FlaskClient = create_app(ElasticConfig()).test_client()

INTERESTING = st.sampled_from([
    "", "CREATE", "UPDATE", "DELETE", "Pod", "PyTorchJob", "pytorchjob-controller", "worker", "master", "0", "3",
    "2:4", "4", "4:4", "0:1", "x:y", "PET_NNODES", "pytorch", "default-scheduler", "volcano",
    "volcano-elastic.io/scale-up", "volcano-elastic.io/role", "a/b~c", "\u00e9\u4e2d", "admission.k8s.io/v1",
    "AdmissionReview", "Never", "OnFailure",
])
SCALARS = st.none() | st.booleans() | st.integers(-5, 2**40) | st.floats(allow_nan=False) | \
    st.text(max_size=12) | INTERESTING
# Cheap to draw (the recursive strategy costs more than the request): shapes the code must survive.
POOL = [None, True, False, 0, -1, 1.5, 2**63, "", "x", [], {}, [None], [{}], [[]], ["x"], {"": None},
        {"name": None}, {"name": 1}, {"name": "volcano-elastic.io/scale-up"}, [{"name": "x"}, "y"],
        {"value": ["2:4"]}, {"a": {"b": {"c": []}}}, [{"name": "PET_NNODES", "value": 3}]]
MUTATIONS = (st.sampled_from(POOL) | SCALARS).map(copy.deepcopy)  # drawn values get mutated later
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) |
                      st.dictionaries(st.text(max_size=8) | INTERESTING, inner, max_size=3), max_leaves=8)

BASES = [
    review(pod(index=3)),
    review(pod(index=0, master_label=True, annotations={"a/b": "c"}, gates=["volcano-elastic.io/scale-up"])),
    review(pod(rtype="master", scheduler="other")),
    review(pod(index=2, nnodes=None), dry_run=True),
    review(pod(index=1), operation="UPDATE", old=pod(index=1)),
    review(None, operation="DELETE", old=pod()),
    review(job(), kind="PyTorchJob", group="kubeflow.org"),
    review(job(workers=3, master=True, max_restarts=None, metrics=True), kind="PyTorchJob", group="kubeflow.org"),
    review(job(restart_policy="Never"), kind="PyTorchJob", operation="UPDATE", old=job()),
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_reviews(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(MUTATIONS)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8) | INTERESTING)] = draw(MUTATIONS)
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(MUTATIONS))
        if not isinstance(doc, dict):
            break
    return doc


def check(path: str, body: bytes, sent: Any, ctype: str = "application/json") -> None:
    resp = CLIENT.post(path, data=body, headers={"Content-Type": ctype})
    assert resp.status_code in (200, 400), (resp.status_code, resp.get_data(as_text=True))
    answer = json.loads(resp.get_data())
    if resp.status_code == 400:
        assert isinstance(answer["error"], str) and answer["error"]
        return
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    inner = answer["response"]
    assert inner["uid"] == sent["request"]["uid"]
    assert isinstance(inner["allowed"], bool)
    assert all(isinstance(w, str) for w in inner.get("warnings", []))
    if path == "/validate-pytorchjobs":
        assert "patch" not in inner
        if not inner["allowed"]:
            assert inner["status"]["message"]
        return
    assert inner["allowed"] is True
    if "patch" in inner:
        obj = sent["request"]["object"]
        after = jsonpatch.apply_patch(obj, decode_patch(answer), in_place=False)
        names = [g.get("name") for g in after["spec"].get("schedulingGates") or []]
        assert names.count("volcano-elastic.io/scale-up") <= 1  # a duplicate gate fails pod creation
        before = (obj.get("metadata") or {}).get("annotations") or {}
        added = {k: v for k, v in after["metadata"]["annotations"].items() if k not in before}
        assert all(isinstance(v, str) for v in added.values())
        again = CLIENT.post(path, json=review(after))
        assert again.status_code == 200 and "patch" not in again.get_json()["response"]  # idempotent


@FUZZ
@given(doc=mutated_reviews(), path=st.sampled_from(["/mutate-pods", "/validate-pytorchjobs"]))
def test_mutated_reviews(doc: dict[str, Any], path: str) -> None:
    check(path, json.dumps(doc).encode(), doc)


@settings(FUZZ, max_examples=1000)
@given(value=VALUES, path=st.sampled_from(["/mutate-pods", "/validate-pytorchjobs"]))
def test_arbitrary_json(value: Any, path: str) -> None:
    wrapped = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": value}
    for doc in (value, wrapped):
        check(path, json.dumps(doc).encode(), doc)


@settings(FUZZ, max_examples=1500)
@given(body=st.binary(max_size=200) | st.text(max_size=200).map(str.encode),
       ctype=st.sampled_from(["application/json", "application/json; charset=utf-16", "text/plain", "",
                              "application/json; charset=UTF-8", "multipart/form-data; boundary=x"]),
       path=st.sampled_from(["/mutate-pods", "/validate-pytorchjobs"]))
def test_arbitrary_bytes(body: bytes, ctype: str, path: str) -> None:
    resp = CLIENT.post(path, data=body, headers={"Content-Type": ctype})
    assert resp.status_code == 400 or (resp.status_code == 200 and isinstance(resp.get_json(), dict))
    assert "error" in resp.get_json() or resp.status_code == 200
