"""The Kubeflow training operator (PyTorchJob only): the certificates its cert-controller expects,
its ValidatingWebhookConfiguration pointed at 127.0.0.1, and the process."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from . import paths, pki
from .component import BoxLike, Component, Ports, Spec, http_ready
from .procs import BoxError, log_tail

OPERATOR_NAMESPACE = "kubeflow"
OPERATOR_WEBHOOK_CONFIG = "validator.training-operator.kubeflow.org"
OPERATOR_WEBHOOK_SECRET = "training-operator-webhook-cert"
# cert-controller (inside the training operator) only checks that this file exists; the
# webhook server itself reads $TMPDIR/k8s-webhook-server/serving-certs (TMPDIR is per box).
OPERATOR_FIXED_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")


def prereqs(box: BoxLike) -> None:
    """Give the training operator the certificates its cert-controller expects, and point
    its ValidatingWebhookConfiguration at 127.0.0.1 (there is no Service to route to)."""
    d = box.pki_dir / "training-operator"
    svc = f"training-operator.{OPERATOR_NAMESPACE}.svc"
    # CA must verify for the DNS name "training-operator-ca" and be RSA/PKCS#1 (cert-controller)
    ca = pki.make_ca("training-operator-ca", key_kind="rsa", dns_names=["training-operator-ca"],
                     orgs=["training-operator"])
    srv = pki.issue(ca, svc, dns_names=[svc, f"{svc}.cluster.local", "localhost"], ips=["127.0.0.1"])
    ca.write(d / "ca.crt", d / "ca.key")
    srv.write(d / "tls.crt", d / "tls.key")
    cert_dir = box.dir / "tmp" / "k8s-webhook-server" / "serving-certs"
    srv.write(cert_dir / "tls.crt", cert_dir / "tls.key")
    if not (OPERATOR_FIXED_CERT_DIR / "tls.crt").exists():
        try:
            srv.write(OPERATOR_FIXED_CERT_DIR / "tls.crt", OPERATOR_FIXED_CERT_DIR / "tls.key")
            box.created_fixed_cert_dir = True
        except OSError as e:
            raise BoxError(f"cannot create {OPERATOR_FIXED_CERT_DIR} (the training operator waits for "
                           f"a file there): {e}") from None

    k = box.kube
    k.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": OPERATOR_NAMESPACE}})
    k.apply(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/secrets/{OPERATOR_WEBHOOK_SECRET}", {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": OPERATOR_WEBHOOK_SECRET, "namespace": OPERATOR_NAMESPACE},
        "data": {"ca.crt": base64.b64encode(ca.cert_pem).decode(),
                 "ca.key": base64.b64encode(ca.key_pem).decode(),
                 "tls.crt": base64.b64encode(srv.cert_pem).decode(),
                 "tls.key": base64.b64encode(srv.key_pem).decode()},
    })
    url = webhook_url(box)
    k.apply(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{OPERATOR_WEBHOOK_CONFIG}", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": OPERATOR_WEBHOOK_CONFIG},
        "webhooks": [{
            "name": "validator.pytorchjob.training-operator.kubeflow.org",
            "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {"url": url, "caBundle": base64.b64encode(ca.cert_pem).decode()},
            "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["pytorchjobs"]}],
        }],
    })


def webhook_url(box: BoxLike) -> str:
    return f"https://127.0.0.1:{box.ports['operator_webhook']}/validate-kubeflow-org-v1-pytorchjob"


def webhook_served(box: BoxLike) -> bool:
    """Whether the operator's webhook server answers the PyTorchJob validation path. Its /readyz
    answers before the path is registered (the operator sets its webhooks up once its certificates
    are ready); until then the path is a 404, which the API server turns into a 500 on every
    PyTorchJob create."""
    ctx = ssl.create_default_context(cafile=str(box.pki_dir / "training-operator" / "ca.crt"))
    req = urllib.request.Request(webhook_url(box), data=json.dumps({}).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx):
            return True
    except urllib.error.HTTPError as e:
        return e.code != 404
    except (OSError, ssl.SSLError):
        return False


def wait_webhook_served(box: BoxLike) -> None:
    """Wait until the operator validates PyTorchJobs (its log in the error when it does not)."""
    t = time.monotonic()
    try:
        box.kube.wait_for("the training operator's PyTorchJob webhook", lambda: webhook_served(box),
                          box.opts.timeout)
    except TimeoutError as e:
        raise BoxError(f"{e}\ntraining-operator log:\n{log_tail(box.procs['training-operator'].log, 15)}") from None
    box.say(f"the training operator's webhook served in {time.monotonic() - t:.1f}s")


def component(box_dir: Path, kubeconfig: Path, threads: int, prepare: Callable[[], None], ports: Ports) -> Component:
    threads = max(1, threads)
    return Component("training-operator", (
        str(paths.binary("training-operator")), f"--kubeconfig={kubeconfig}",
        "--enable-scheme=pytorchjob", "--leader-elect=false",
        f"--webhook-server-port={ports['operator_webhook']}",
        f"--metrics-bind-address=127.0.0.1:{ports['operator_metrics']}",
        f"--health-probe-bind-address=127.0.0.1:{ports['operator_probe']}",
        "--zap-devel=false", "--zap-log-level=info",
        # its defaults (1 reconcile thread, 20 QPS, burst 30) unless the options ask for more
        # threads: at 1,000 jobs one thread creates about a pod a second (bench/scale_box.py)
        f"--controller-threads={threads}", f"--kube-api-qps={20 * threads}",
        f"--kube-api-burst={30 * threads}",
    ), http_ready(f"http://127.0.0.1:{ports['operator_probe']}/readyz"),
        env={"MY_POD_NAMESPACE": OPERATOR_NAMESPACE, "TMPDIR": str(box_dir / "tmp")}, prepare=prepare)


def spec(box_dir: Path, kubeconfig: Path, threads: int, prepare: Callable[[], None]) -> Spec:
    """The training operator; ``prepare`` (prereqs: its certificates and the webhook configuration
    for the port just picked) runs before every (re)start."""
    return Spec("training-operator", ("operator_webhook", "operator_metrics", "operator_probe"),
                lambda ports: component(box_dir, kubeconfig, threads, prepare, ports))
