"""Our errors at the API edge; the client library's exceptions never leave ``kube``."""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """A request to the API server failed. ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0, reason: str = "", body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.body = body


class NotFoundError(KubeError):
    """404."""


class ConflictError(KubeError):
    """409: the object changed under us (resourceVersion/uid precondition) or already exists."""


class AlreadyExistsError(ConflictError):
    """409 with reason AlreadyExists on create."""


class GoneError(KubeError):
    """410: the watch's resourceVersion is too old; relist."""


class TooManyRequestsError(KubeError):
    """429 from the Eviction API for a PodDisruptionBudget: it refuses the eviction (its cause
    ``DisruptionBudget``, or its message names the disruption budget). Any other 429 (the API
    server's throttling, API Priority and Fairness) is a ``ThrottledError``."""


class InvalidError(KubeError):
    """422: the server rejected the object or the patch."""


class ForbiddenError(KubeError):
    """403."""


class UnavailableError(KubeError):
    """No answer, a timeout or a 5xx: worth retrying later."""


class ThrottledError(UnavailableError):
    """429 that is no PodDisruptionBudget's refusal: the API server throttled the request (API
    Priority and Fairness, max-requests-inflight); worth retrying later, never a PDB refusal."""


def is_pdb_refusal(body: Any, message: str) -> bool:
    """Whether a 429's Status (``body``, ``message``) is the Eviction API refusing for a
    PodDisruptionBudget: a cause ``DisruptionBudget`` (Kubernetes 1.26+), or the message it has
    always given ("... would violate the pod's disruption budget")."""
    details = body.get("details") if isinstance(body, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    if isinstance(causes, list) and any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes):
        return True
    return "disruption budget" in message.lower()


_BY_STATUS: dict[int, type[KubeError]] = {
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
}


def error_for(status: int, body: bytes | str | None, what: str) -> KubeError:
    """The KubeError for an HTTP answer; the message is the API server's own when it gave one."""
    parsed: Any = None
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    reason = ""
    message = text[:300]
    if isinstance(parsed, dict):
        reason = str(parsed.get("reason") or "")
        message = str(parsed.get("message") or message)
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = UnavailableError if status == 0 or status >= 500 else KubeError
    if cls is ConflictError and reason == "AlreadyExists":
        cls = AlreadyExistsError
    if cls is TooManyRequestsError and not is_pdb_refusal(parsed, message):
        cls = ThrottledError
    return cls(f"{what}: {status} {reason}: {message}".strip(), status, reason, parsed)
