"""Connecting the commands that read a cluster (``status``, ``queues``, ``release-gates``) with a
plain sentence when it cannot be done; apart from ``common.py`` so that ``plan``, which never talks
to a cluster, does not import the API client (an import-linter contract)."""

from __future__ import annotations

import argparse
import os

from ..kube.client import KubeClient
from ..kube.errors import KubeError
from .common import fail


def connect(args: argparse.Namespace, command: str) -> KubeClient:
    """A client for ``--kubeconfig``/``--context``; exit 1 with a plain sentence when there is none
    (a kubeconfig that does not exist, no kubeconfig at all, a context it does not have)."""
    path = getattr(args, "kubeconfig", None)
    named = path or os.environ.get("KUBECONFIG") or None
    if named:
        missing = [p for p in named.split(os.pathsep) if p and not os.path.exists(p)]
        if missing and len(missing) == len([p for p in named.split(os.pathsep) if p]):
            source = "--kubeconfig" if path else "$KUBECONFIG"
            fail(command, f"kubeconfig {named} ({source}) does not exist", 1)
    elif not os.path.exists(os.path.expanduser("~/.kube/config")) and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        fail(command, "no kubeconfig: pass --kubeconfig, set $KUBECONFIG or create ~/.kube/config", 1)
    context = getattr(args, "context", None)
    if context and named:
        known = _contexts(named.split(os.pathsep))
        if known is not None and context not in known:
            fail(command, f"context {context!r} is not in kubeconfig {named} (it has: {', '.join(known) or 'none'})", 1)
    try:
        return KubeClient.from_kubeconfig(path, context=context)
    except KubeError as exc:
        fail(command, str(exc), 1)


def _contexts(paths: list[str]) -> list[str] | None:
    """The context names of the kubeconfig files ``paths`` (None: unreadable; the client says why)."""
    import yaml

    names: list[str] = []
    for p in paths:
        if not p or not os.path.exists(p):
            continue
        try:
            with open(p, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            return None
        entries = doc.get("contexts") if isinstance(doc, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("name"):
                names.append(str(entry["name"]))
    return names
