"""The Flask layer: routes, 400s for every kind of malformed request, metrics."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from elastic_controller.policy.settings import ElasticConfig
from tests.harness.legacy import legacy_config
from tests.harness.webhook_objects import apply, job, pod, review
from webhook.app import MAX_BODY_BYTES, create_app

JSON = "application/json"


@pytest.fixture
def client() -> FlaskClient:
    return create_app(legacy_config()).test_client()  # worker 3 of 1..4 gated: not admitted whole


def post(client: FlaskClient, body: bytes | str, path: str = "/mutate-pods", ctype: str | None = JSON) -> Any:
    headers = {"Content-Type": ctype} if ctype is not None else {}
    return client.post(path, data=body, headers=headers)


def test_mutate_round_trip(client: FlaskClient) -> None:
    p = pod(index=3)
    resp = post(client, json.dumps(review(p)))
    assert resp.status_code == 200 and resp.mimetype == JSON
    after = apply(p, resp.get_json())
    assert after["spec"]["schedulingGates"] == [{"name": "volcano-elastic.io/scale-up"}]


def test_validate_round_trip(client: FlaskClient) -> None:
    resp = post(client, json.dumps(review(job(restart_policy="Never"), kind="PyTorchJob")),
                "/validate-pytorchjobs")
    assert resp.status_code == 200
    assert resp.get_json()["response"]["allowed"] is False


def test_charset_utf8_is_fine(client: FlaskClient) -> None:
    resp = post(client, json.dumps(review(pod())), ctype="application/json; charset=utf-8")
    assert resp.status_code == 200


BAD = [
    ("not JSON", b"{", JSON, "not JSON"),
    ("empty body", b"", JSON, "not JSON"),
    ("not UTF-8", b'{"a": "\xff\xfe"}', JSON, "not UTF-8"),
    ("wrong content type", json.dumps(review(pod())).encode(), "text/plain", "Content-Type"),
    ("no content type", json.dumps(review(pod())).encode(), None, "Content-Type"),
    ("latin-1 charset", json.dumps(review(pod())).encode(), "application/json; charset=latin-1", "charset"),
    ("JSON array", b"[]", JSON, "JSON object"),
    ("wrong apiVersion", json.dumps({**review(pod()), "apiVersion": "admission.k8s.io/v1beta1"}).encode(), JSON,
     "apiVersion"),
    ("wrong kind", json.dumps({**review(pod()), "kind": "Pod"}).encode(), JSON, "kind"),
    ("no request", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(), JSON,
     "request"),
    ("no uid", json.dumps({**review(pod()), "request": {**review(pod())["request"], "uid": ""}}).encode(), JSON,
     "uid"),
    ("no object on CREATE", json.dumps(review(None)).encode(), JSON, "request.object"),
    ("bad operation", json.dumps({**review(pod()), "request": {**review(pod())["request"], "operation": "PATCH"}})
     .encode(), JSON, "operation"),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, JSON, "nested too deeply"),
    ("huge integer", b'{"a": ' + b"9" * 5000 + b"}", JSON, "not JSON"),
]


@pytest.mark.parametrize("path", ["/mutate-pods", "/validate-pytorchjobs"])
@pytest.mark.parametrize(("body", "ctype", "needle"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_malformed_requests_are_400_with_a_json_reason(client: FlaskClient, path: str, body: bytes,
                                                       ctype: str | None, needle: str) -> None:
    resp = post(client, body, path, ctype)
    assert resp.status_code == 400, resp.get_data(as_text=True)
    assert resp.mimetype == JSON
    assert needle in resp.get_json()["error"]


def test_malformed_pyorchjob_pod_is_400(client: FlaskClient) -> None:
    resp = post(client, json.dumps(review({**pod(), "spec": "x"})))
    assert resp.status_code == 400 and "request.object.spec" in resp.get_json()["error"]


def test_body_over_3_mib_is_400(client: FlaskClient) -> None:
    doc = review(pod())
    doc["request"]["object"]["metadata"]["annotations"] = {"big": "x" * MAX_BODY_BYTES}
    resp = post(client, json.dumps(doc))
    assert resp.status_code == 400 and "limit" in resp.get_json()["error"]


def test_body_over_3_mib_without_content_length_is_400(client: FlaskClient) -> None:
    body = b"x" * (MAX_BODY_BYTES + 10)
    # As gunicorn serves a chunked body: no Content-Length, the input stream ends at the body's end.
    resp = client.post("/mutate-pods", input_stream=io.BytesIO(body),
                       headers={"Content-Type": JSON, "Transfer-Encoding": "chunked"},
                       environ_overrides={"wsgi.input_terminated": True})
    assert resp.status_code == 400 and "limit" in resp.get_json()["error"]


def test_body_just_under_the_limit_is_read(client: FlaskClient) -> None:
    doc = review(pod())
    base = len(json.dumps(doc))
    doc["request"]["object"]["metadata"]["annotations"] = {"big": "x" * (MAX_BODY_BYTES - base - 40)}
    resp = post(client, json.dumps(doc))
    assert resp.status_code == 200


def test_unknown_path_and_method_are_json(client: FlaskClient) -> None:
    assert client.get("/nope").status_code == 404
    resp = client.get("/mutate-pods")
    assert resp.status_code == 405 and "error" in resp.get_json()


def test_health_and_readiness(client: FlaskClient) -> None:
    assert client.get("/healthz").get_json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200


def test_metrics_count_requests_results_and_roles(client: FlaskClient) -> None:
    post(client, json.dumps(review(pod(index=3))))
    post(client, json.dumps(review(pod(index=0, master_label=True))))
    post(client, b"{")
    post(client, json.dumps(review(job(workers=9), kind="PyTorchJob")), "/validate-pytorchjobs")
    text = client.get("/metrics").get_data(as_text=True)
    assert 'volcano_elastic_webhook_requests_total{endpoint="mutate-pods",result="patched"} 2.0' in text
    assert 'volcano_elastic_webhook_requests_total{endpoint="mutate-pods",result="bad_request"} 1.0' in text
    assert 'volcano_elastic_webhook_requests_total{endpoint="validate-pytorchjobs",result="denied"} 1.0' in text
    assert 'volcano_elastic_webhook_patches_total{role="elastic"} 1.0' in text
    assert 'volcano_elastic_webhook_patches_total{role="master"} 1.0' in text
    assert "volcano_elastic_webhook_request_duration_seconds_bucket" in text


def test_two_apps_do_not_share_metrics() -> None:
    a, b = create_app(ElasticConfig()).test_client(), create_app(ElasticConfig()).test_client()
    post(a, b"{")
    assert 'result="bad_request"' not in b.get("/metrics").get_data(as_text=True)
