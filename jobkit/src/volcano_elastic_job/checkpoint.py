"""``record_checkpoint()``: tell volcano-elastic that this job has just made a durable checkpoint.

It merge-patches this pod's ``volcano-elastic.io/last-checkpoint-time`` through the in-cluster API
with the pod's ServiceAccount token. volcano-elastic's controller grants that ServiceAccount
``patch`` on exactly the job's own pods (docs/checkpointing.md), so the job brings no Role.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

from .podinfo import LAST_CHECKPOINT_TIME

log = logging.getLogger("volcano_elastic_job")

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def format_time(when: datetime) -> str:
    """RFC 3339 UTC with second precision, as volcano-elastic writes its own times."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def pod_name() -> str:
    """This pod's name: ``POD_NAME`` (downward API), else the hostname (a pod's, unless its spec
    sets ``hostname``)."""
    return os.environ.get("POD_NAME") or os.environ.get("HOSTNAME") or socket.gethostname()


def api_server() -> str | None:
    """The in-cluster API server's URL, from the variables the kubelet sets; None outside a pod."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return None
    host = f"[{host}]" if ":" in host else host  # IPv6
    return f"https://{host}:{port}"


def record_checkpoint(when: datetime | None = None, *, pod: str | None = None, namespace: str | None = None,
                      api_url: str | None = None, sa_dir: str = SERVICE_ACCOUNT_DIR,
                      timeout: float = 5.0) -> bool:
    """Write ``when`` (default: now) into this pod's ``volcano-elastic.io/last-checkpoint-time``.

    Call it from one process (e.g. global rank 0) once the checkpoint is durable on shared storage.
    Returns True when the API server took it; on any failure (no token, 403, timeout, not in a pod)
    it logs a warning and returns False: training goes on, volcano-elastic just does not know about
    this checkpoint."""
    stamp = format_time(when or datetime.now(timezone.utc))
    return annotate_pod({LAST_CHECKPOINT_TIME: stamp}, f"checkpoint time {stamp}", pod=pod, namespace=namespace,
                        api_url=api_url, sa_dir=sa_dir, timeout=timeout)


def annotate_pod(annotations: dict[str, str], what: str, *, pod: str | None = None, namespace: str | None = None,
                 api_url: str | None = None, sa_dir: str = SERVICE_ACCOUNT_DIR, timeout: float = 5.0) -> bool:
    """Merge-patch ``annotations`` onto this pod through the in-cluster API (``what`` names them in
    the log). True when the API server took them; logs and returns False on any failure."""
    try:
        base = api_url or api_server()
        if base is None:
            log.warning("volcano-elastic: %s not recorded: not in a pod "
                        "(KUBERNETES_SERVICE_HOST is not set)", what)
            return False
        token = _read(os.path.join(sa_dir, "token"))  # re-read each time: the kubelet rotates it
        ns = namespace or os.environ.get("POD_NAMESPACE") or _read(os.path.join(sa_dir, "namespace"))
        name = pod or pod_name()
        url = (f"{base.rstrip('/')}/api/v1/namespaces/{urllib.parse.quote(ns, safe='')}"
               f"/pods/{urllib.parse.quote(name, safe='')}")
        body = json.dumps({"metadata": {"annotations": annotations}}).encode()
        request = urllib.request.Request(url, data=body, method="PATCH", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json",
            "Accept": "application/json"})
        context = None
        if url.startswith("https:"):
            ca = os.path.join(sa_dir, "ca.crt")
            context = ssl.create_default_context(cafile=ca if os.path.exists(ca) else None)
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        hint = ""
        if exc.code == 403:
            hint = (" (the pod's ServiceAccount may not patch this pod: run the Worker pods as a "
                    "ServiceAccount of their own, not 'default', and see docs/checkpointing.md)")
        log.warning("volcano-elastic: %s not recorded on pod %s: HTTP %s%s",
                    what, pod or pod_name(), exc.code, hint)
        return False
    except (OSError, ValueError) as exc:  # URLError, timeouts, a missing token file, a bad URL
        log.warning("volcano-elastic: %s not recorded: %s", what, exc)
        return False
    except Exception as exc:  # never let the bookkeeping stop the training
        log.warning("volcano-elastic: %s not recorded: %r", what, exc)
        return False
    log.info("volcano-elastic: %s recorded on pod %s", what, name)
    return True
