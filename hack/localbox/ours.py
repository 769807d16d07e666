"""Our own stack on a box, as local processes: the webhook's and the controller's command lines and
the webhook configurations that route the API server to the webhook, built as values, and one way to
start them (``start_webhook``, ``register``) shared by the tests (tests/harness/stack.py,
tests/harness/appliedbox.py), the demo (hack/demo.py) and the benchmarks (bench/agent_vs_native.py,
bench/scale_box.py). The in-cluster stack (Helm, our image) is the real-node tier's
(tests/harness/realstack.py)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .polling import poll_until

# what our pod webhook mutates: the training operator's pods
OPERATOR_PODS = {"matchLabels": {"training.kubeflow.org/operator-name": "pytorchjob-controller"}}


def webhook_argv(cert: Path, key: Path, port: int, config: Path, workers: int = 1) -> list[str]:
    """``volcano-elastic webhook`` on 127.0.0.1:``port`` with the serving certificate ``cert``/``key``."""
    return [sys.executable, "-m", "elastic_controller", "webhook", f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}", f"--port={port}", "--host=127.0.0.1", f"--workers={workers}",
            f"--config={config}"]


def controller_argv(kubeconfig: Path | str, config: Path, lease_namespace: str, *, agent: bool = True,
                    http_port: int = 0) -> list[str]:
    """``volcano-elastic controller`` (with its agent unless ``agent`` is false)."""
    return [sys.executable, "-m", "elastic_controller", "controller", "--kubeconfig", str(kubeconfig),
            "--config", str(config), "--lease-namespace", lease_namespace, "--http-port", str(http_port),
            *([] if agent else ["--no-agent"])]


def client_config(port: int, path: str, ca_bundle: str) -> dict[str, str]:
    """A webhook's clientConfig for a server on this machine (by URL: a box has no Service to route to)."""
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}


def pod_webhook(name: str, port: int, ca_bundle: str, timeout: int = 10) -> dict[str, Any]:
    """The MutatingWebhookConfiguration ``name``: the training operator's new pods go to our webhook
    (failurePolicy Fail, reinvoked when another webhook changed the pod)."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": [{
                "name": "pods.volcano-elastic.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": timeout, "reinvocationPolicy": "IfNeeded",
                "clientConfig": client_config(port, "/mutate-pods", ca_bundle), "objectSelector": OPERATOR_PODS,
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"]}]}]}


def job_webhook(name: str, port: int, ca_bundle: str, timeout: int = 10) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration ``name``: PyTorchJobs created or updated go to our validation."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": [{
                "name": "pytorchjobs.volcano-elastic.io", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": timeout,
                "clientConfig": client_config(port, "/validate-pytorchjobs", ca_bundle),
                "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                           "resources": ["pytorchjobs"]}]}]}


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_webhook(spawn: Callable[[str, list[str]], Any], argv: Sequence[str], port: int,
                  name: str = "webhook", timeout: float = 30) -> Any:
    """Start our webhook with ``spawn`` (a box's ``spawn``, the tests' ``box_process``) and wait until it
    listens; returns what ``spawn`` returned."""
    proc = spawn(name, list(argv))
    poll_until("our webhook listening", lambda: port_open(port), timeout, 0.2)
    return proc
