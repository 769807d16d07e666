"""The AdmissionReview ``admission.k8s.io/v1`` envelope: read a request, write a response.

Inputs are JSON-decoded (``dict``/``list``), checked with the concrete types: it is the hot
path of every pod creation. A review that is not a well-formed AdmissionReview raises ``BadReviewError``: the HTTP layer
answers 400 with the message. A well-formed review of a bad object is a denial instead.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
_encode = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(..., separators=) builds one per call


class BadReviewError(ValueError):
    """The request body is not an AdmissionReview we can answer (HTTP 400)."""


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    operation: str
    group: str  # request.kind.group ("" for core)
    kind: str  # request.kind.kind ("" when absent)
    sub_resource: str
    namespace: str
    name: str
    dry_run: bool
    obj: Mapping[str, Any] | None
    old_obj: Mapping[str, Any] | None


def _str(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadReviewError(f"request.{key} must be a string, got {type(value).__name__}")
    return value


def _object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadReviewError(f"request.{key} must be an object, got {type(value).__name__}")
    return value


def parse_review(doc: Any) -> AdmissionRequest:
    """The request of an AdmissionReview document; raises BadReviewError naming what is wrong."""
    if not isinstance(doc, dict):
        raise BadReviewError(f"body must be a JSON object (an AdmissionReview), got {type(doc).__name__}")
    if doc.get("apiVersion") != API_VERSION:
        raise BadReviewError(f"apiVersion must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise BadReviewError(f"kind must be {KIND!r}, got {doc.get('kind')!r}")
    request = doc.get("request")
    if not isinstance(request, dict):
        raise BadReviewError("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReviewError("request.uid is missing or not a non-empty string")
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise BadReviewError(f"request.operation must be one of {sorted(OPERATIONS)}, got {operation!r}")
    gvk = request.get("kind")
    if gvk is None:
        gvk = {}
    if not isinstance(gvk, dict):
        raise BadReviewError("request.kind must be an object (group, version, kind)")
    group, kind = gvk.get("group") or "", gvk.get("kind") or ""
    if not isinstance(group, str) or not isinstance(kind, str):
        raise BadReviewError("request.kind.group and request.kind.kind must be strings")
    dry_run = request.get("dryRun", False)
    if dry_run is None:
        dry_run = False
    if not isinstance(dry_run, bool):
        raise BadReviewError(f"request.dryRun must be true or false, got {dry_run!r}")
    obj = _object(request, "object")
    if obj is None and operation in ("CREATE", "UPDATE"):
        raise BadReviewError(f"request.object is missing: a {operation} review carries the object")
    return AdmissionRequest(
        uid=uid,
        operation=str(operation),
        group=group,
        kind=kind,
        sub_resource=_str(request, "subResource"),
        namespace=_str(request, "namespace"),
        name=_str(request, "name"),
        dry_run=dry_run,
        obj=obj,
        old_obj=_object(request, "oldObject"),
    )


def respond(
    uid: str,
    *,
    patch: Sequence[Mapping[str, Any]] = (),
    warnings: Sequence[str] = (),
    denial: str = "",
) -> dict[str, Any]:
    """An AdmissionReview response: allowed (with an optional JSONPatch) or denied with a message."""
    response: dict[str, Any] = {"uid": uid, "allowed": not denial}
    if denial:
        response["status"] = {"code": 422, "reason": "Invalid", "message": denial}
    elif patch:
        raw = _encode(list(patch)).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(raw).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
