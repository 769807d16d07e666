"""The whole webhook logic as functions from an AdmissionReview dict to a response dict.

Pure: no Flask, no Kubernetes client, no logging. The caller gets a ``ReviewOutcome`` with the
response, a result for metrics and structured fields for its log line. Malformed reviews
raise ``BadReviewError`` (HTTP 400).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_controller.policy import keys
from elastic_controller.policy.neighbours import job_neighbour
from elastic_controller.policy.settings import ElasticConfig

from .envelope import AdmissionRequest, BadReviewError, parse_review, respond
from .mutate import plan_pod_patch
from .tenancy import tenant_rules
from .validate import JobVerdict, validate_job

__all__ = ["BadReviewError", "ReviewOutcome", "review_job", "review_pod"]

PYTORCHJOB_GROUP = "kubeflow.org"


@dataclass(frozen=True, slots=True)
class ReviewOutcome:
    response: dict[str, Any]
    result: str  # allowed | patched | denied
    role: str = ""  # the role of a patched pod
    fields: dict[str, Any] = field(default_factory=dict)  # for the log line
    notable: bool = False  # worth a log line of its own (warning or denial)


def _fields(req: AdmissionRequest, name: str) -> dict[str, Any]:
    return {
        "uid": req.uid,
        "operation": req.operation,
        "kind": req.kind,
        "namespace": req.namespace,
        "name": name,
        "dryRun": req.dry_run,
    }


def _name(obj: Mapping[str, Any] | None, req: AdmissionRequest) -> str:
    meta = (obj or {}).get("metadata")
    if isinstance(meta, dict):
        name = meta.get("name") or meta.get("generateName")
        if isinstance(name, str) and name:
            return name
    return req.name


def review_pod(doc: Any, cfg: ElasticConfig) -> ReviewOutcome:
    """``/mutate-pods``: CREATE of a PyTorchJob pod gets the pod contract; everything else passes."""
    req = parse_review(doc)
    fields = _fields(req, _name(req.obj, req))
    if req.operation != "CREATE" or req.sub_resource or (req.kind and req.kind != "Pod") or req.obj is None:
        return ReviewOutcome(respond(req.uid), "allowed", fields=fields)
    patch = plan_pod_patch(req.obj, cfg)
    if patch.neighbour:
        fields.update(job=patch.job, reason=f"neighbour: {patch.neighbour}", warnings=patch.warnings)
        return ReviewOutcome(respond(req.uid, warnings=patch.warnings), "allowed", fields=fields, notable=True)
    if patch.role is None:
        return ReviewOutcome(respond(req.uid), "allowed", fields=fields)
    fields.update(job=patch.job, role=patch.role.value, ops=len(patch.ops))
    if patch.kept:
        fields["kept"] = patch.kept
    if patch.warnings:
        fields["warnings"] = patch.warnings
    if patch.bounds_unknown:
        fields["reason"] = "elastic bounds unknown: not gated, not elastic"
    return ReviewOutcome(
        respond(req.uid, patch=patch.ops, warnings=patch.warnings),
        "patched" if patch.ops else "allowed",
        role=patch.role.value if patch.ops else "",
        fields=fields,
        notable=bool(patch.warnings),
    )


def _contract(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """The annotations of the job contract the validating webhook checks (worker-counts/-step)."""
    meta = obj.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    ann = ann if isinstance(ann, Mapping) else {}
    return tuple(ann.get(k) for k in keys.COPIED_TO_PODGROUP)


def review_job(doc: Any, cfg: ElasticConfig) -> ReviewOutcome:
    """``/validate-pytorchjobs``: deny elastic specs that cannot work, warn on doubtful ones."""
    req = parse_review(doc)
    obj = req.obj
    fields = _fields(req, _name(obj, req))
    if (
        req.operation not in ("CREATE", "UPDATE")
        or req.sub_resource
        or (req.kind and req.kind != "PyTorchJob")
        or obj is None
    ):
        return ReviewOutcome(respond(req.uid), "allowed", fields=fields)
    meta = obj.get("metadata")
    if isinstance(meta, dict) and meta.get("deletionTimestamp"):
        return ReviewOutcome(respond(req.uid), "allowed", fields=fields)  # finalizers must go through
    if req.operation == "UPDATE" and req.old_obj is not None and req.old_obj.get("spec") == obj.get("spec") \
            and _contract(req.old_obj) == _contract(obj):
        return ReviewOutcome(respond(req.uid), "allowed", fields=fields)  # metadata-only update
    verdict = validate_job(obj, cfg)
    if job_neighbour(obj, cfg.schedulerName) is None:  # a neighbour's job is not ours to bound
        refused = tenant_rules(obj, req.old_obj if req.operation == "UPDATE" else None, req.namespace, cfg)
        if refused:
            verdict = JobVerdict(errors=(*refused, *verdict.errors), warnings=verdict.warnings)
    if verdict.warnings:
        fields["warnings"] = list(verdict.warnings)
    if not verdict.allowed:
        fields["errors"] = list(verdict.errors)
        who = f"PyTorchJob {req.namespace + '/' if req.namespace else ''}{fields['name']}"
        message = f"{who}: " + "; ".join(verdict.errors)
        return ReviewOutcome(
            respond(req.uid, warnings=verdict.warnings, denial=message), "denied", fields=fields, notable=True
        )
    return ReviewOutcome(
        respond(req.uid, warnings=verdict.warnings), "allowed", fields=fields, notable=bool(verdict.warnings)
    )
