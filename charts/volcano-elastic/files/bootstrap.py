"""Issue (or renew) the webhook's serving certificate in the cluster and register its CA.

Run by the certgen Job at install time and by the certgen CronJob every week, with the
ServiceAccount ``volcano-elastic-certgen`` (see rbac.yaml: one Secret, two webhook
configurations, nothing else). Shipped in the ConfigMap ``volcano-elastic-certgen-script`` and
run with the image's Python, so it uses only what the image already has: our ``certs generate``
command and our JSON API client.

1. Read the Secret (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``).
2. If the serving certificate is missing or expires within RENEW_BEFORE_DAYS, run
   ``volcano-elastic certs generate`` with the stored CA (so the registered caBundle stays
   valid; a CA that is itself about to expire is replaced), then create or update the Secret
   (update carries the resourceVersion it read: a concurrent writer makes us fail and retry).
3. Strategic-merge-patch ``caBundle`` into our webhooks, keyed by webhook name. That needs only
   ``patch`` on the two configurations, not ``get``.

Idempotent: a run with a valid certificate changes nothing but re-asserting the caBundle.
Settings come from the environment (see the Job); for a manual run against a kubeconfig:
``KUBECONFIG=... python manifests/base/certgen/bootstrap.py``.
"""

from __future__ import annotations

import base64
import datetime
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cryptography import x509

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import AlreadyExistsError, ConflictError, KubeError, NotFoundError
from elastic_controller.kube.resources import Resource

SECRETS = Resource("", "v1", "secrets", "Secret")
MUTATING = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                    "MutatingWebhookConfiguration", namespaced=False)
VALIDATING = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                      "ValidatingWebhookConfiguration", namespaced=False)
FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")


def setting(name: str, default: str) -> str:
    return os.environ.get(name) or default


def expires_within(pem: bytes, days: int, now: datetime.datetime) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return True
    return cert.not_valid_after_utc <= now + datetime.timedelta(days=days)


def read_secret(api: KubeClient, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return api.get(SECRETS, name, namespace)
    except NotFoundError:
        return None


def issue(stored: dict[str, bytes], service: str, namespace: str, days: int, renew_days: int,
          now: datetime.datetime) -> dict[str, bytes]:
    """The four files after ``certs generate`` ran with the stored CA (if still good)."""
    with tempfile.TemporaryDirectory(prefix="certgen-") as tmp:
        out = Path(tmp)
        if stored.get("ca.crt") and stored.get("ca.key") and not expires_within(stored["ca.crt"], renew_days, now):
            (out / "ca.crt").write_bytes(stored["ca.crt"])
            (out / "ca.key").write_bytes(stored["ca.key"])
            (out / "ca.key").chmod(0o600)
        else:
            print("certgen: creating a new CA (none stored, or it expires soon)", file=sys.stderr)
        cmd = [sys.executable, "-m", "elastic_controller", "certs", "generate", "--service", service,
               "--namespace", namespace, "--out", str(out), "--days", str(days)]
        subprocess.run(cmd, check=True)
        return {name: (out / name).read_bytes() for name in FILES}


def write_secret(api: KubeClient, existing: dict[str, Any] | None, name: str, namespace: str,
                 files: dict[str, bytes]) -> None:
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "volcano-elastic",
                                "app.kubernetes.io/managed-by": "volcano-elastic-certgen"}},
        "data": {k: base64.b64encode(v).decode() for k, v in files.items()},
    }
    if existing is None:
        api.create(SECRETS, body, namespace)
        return
    if existing.get("type", "Opaque") != "kubernetes.io/tls":
        raise SystemExit(f"certgen: Secret {namespace}/{name} has type {existing.get('type')!r}, not "
                         f"kubernetes.io/tls (the type is immutable): delete it and run the Job again")
    body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
    api.replace(SECRETS, name, body, namespace)


def patch_ca_bundle(api: KubeClient, res: Resource, config_name: str, webhooks: list[str], ca: bytes) -> None:
    if not webhooks:
        return
    bundle = base64.b64encode(ca).decode()
    patch = {"webhooks": [{"name": w, "clientConfig": {"caBundle": bundle}} for w in webhooks]}
    api.patch(res, config_name, patch, patch_type="strategic")
    print(f"certgen: caBundle set on {res.kind} {config_name}: {', '.join(webhooks)}", file=sys.stderr)


def main() -> int:
    namespace = setting("POD_NAMESPACE", "volcano-elastic-system")
    secret = setting("SECRET_NAME", "volcano-elastic-webhook-tls")
    service = setting("SERVICE_NAME", "volcano-elastic-webhook")
    config_name = setting("WEBHOOK_CONFIGURATION", "volcano-elastic")
    mutating = [w for w in setting("MUTATING_WEBHOOKS", "mutate-pods.volcano-elastic.io").split(",") if w]
    validating = [w for w in setting("VALIDATING_WEBHOOKS", "validate-pytorchjobs.volcano-elastic.io").split(",")
                  if w]
    days = int(setting("CERT_DAYS", "365"))
    renew_days = int(setting("RENEW_BEFORE_DAYS", "30"))
    now = datetime.datetime.now(datetime.UTC)

    api = KubeClient.from_kubeconfig(os.environ.get("KUBECONFIG") or None)
    try:
        existing = read_secret(api, secret, namespace)
        stored = {k: base64.b64decode(v) for k, v in ((existing or {}).get("data") or {}).items() if k in FILES}
        if all(stored.get(k) for k in FILES) and not expires_within(stored["tls.crt"], renew_days, now):
            print(f"certgen: {namespace}/{secret} is valid for more than {renew_days} days: kept", file=sys.stderr)
            files = stored
        else:
            files = issue(stored, service, namespace, days, renew_days, now)
            write_secret(api, existing, secret, namespace, files)
            print(f"certgen: {namespace}/{secret} written", file=sys.stderr)
        patch_ca_bundle(api, MUTATING, config_name, mutating, files["ca.crt"])
        patch_ca_bundle(api, VALIDATING, config_name, validating, files["ca.crt"])
    except (AlreadyExistsError, ConflictError) as exc:
        print(f"certgen: someone else wrote the Secret at the same time, retrying: {exc}", file=sys.stderr)
        return 1
    except (KubeError, subprocess.CalledProcessError) as exc:
        print(f"certgen: {exc}", file=sys.stderr)
        return 1
    finally:
        api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
