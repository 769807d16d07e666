"""``volcano-elastic certs {generate,inject-ca,bootstrap}``.

``bootstrap`` issues (or renews) the webhook's serving certificate in the cluster and registers its
CA; the certgen Job runs it at install time and the certgen CronJob every week, with the
ServiceAccount ``volcano-elastic-certgen`` (one Secret, two webhook configurations, nothing else):

1. Read the Secret (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``).
2. If the serving certificate is missing or expires within ``--renew-before-days``, generate one
   with the stored CA (so the registered caBundle stays valid; a CA that is itself about to expire
   is replaced), then create or update the Secret (the update carries the resourceVersion it read:
   a concurrent writer makes it fail, exit 1, and the Job retry).
3. Strategic-merge-patch ``caBundle`` into our webhooks, keyed by webhook name (needs only
   ``patch`` on the two configurations, not ``get``).

Idempotent: a run with a valid certificate changes nothing but re-asserting the caBundle. Every
flag defaults to an environment variable (the Job's ``env``), then to the install's names.
"""

from __future__ import annotations

import argparse
import datetime
import os

from .common import add_kubeconfig_flag, fail

HELP = ("generate the webhook's CA and serving certificate; inject the CA bundle into webhook configs; "
        "bootstrap them in a cluster")

# flag -> (environment variable, default): the certgen Job sets the variables.
BOOTSTRAP_SETTINGS = {
    "namespace": ("POD_NAMESPACE", "volcano-elastic-system"),
    "secret": ("SECRET_NAME", "volcano-elastic-webhook-tls"),
    "service": ("SERVICE_NAME", "volcano-elastic-webhook"),
    "webhook_configuration": ("WEBHOOK_CONFIGURATION", "volcano-elastic"),
    "mutating_webhooks": ("MUTATING_WEBHOOKS", "mutate-pods.volcano-elastic.io"),
    "validating_webhooks": ("VALIDATING_WEBHOOKS", "validate-pytorchjobs.volcano-elastic.io"),
    "days": ("CERT_DAYS", "365"),
    "renew_before_days": ("RENEW_BEFORE_DAYS", "30"),
}
FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")

_BOOT = "volcano-elastic certs bootstrap:"  # the prefix of what `certs bootstrap` says on stderr


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    gen = actions.add_parser(
        "generate",
        help="write ca.crt, ca.key, tls.crt, tls.key to DIR (an existing CA there is reused: "
        "only the serving certificate is renewed)",
    )
    gen.add_argument("--service", required=True, help="the webhook Service's name")
    gen.add_argument("--namespace", required=True, help="the webhook Service's namespace")
    gen.add_argument("--out", required=True, metavar="DIR", help="output directory")
    gen.add_argument("--ip", action="append", default=[], metavar="ADDR",
                     help="an IP address SAN (repeatable), e.g. for a webhook reached by URL")
    gen.add_argument("--days", type=int, default=365, help="serving certificate validity (default: 365)")
    inj = actions.add_parser(
        "inject-ca",
        help="set caBundle on every webhook of the Mutating/ValidatingWebhookConfigurations in FILE "
        "(printed to stdout, or rewritten with --in-place)",
    )
    inj.add_argument("--ca", required=True, metavar="CA_CRT", help="the CA certificate (PEM)")
    inj.add_argument("file", metavar="FILE.yaml", help="multi-document YAML ('-' for stdin)")
    inj.add_argument("-i", "--in-place", action="store_true", help="rewrite FILE instead of printing")
    boot = actions.add_parser(
        "bootstrap",
        help="in the cluster: keep the webhook's certificate Secret valid (renewing it with the stored CA) "
        "and set caBundle on our webhook configurations (what the certgen Job runs)",
    )
    add_kubeconfig_flag(boot)
    for flag, (env, default) in BOOTSTRAP_SETTINGS.items():
        boot.add_argument(f"--{flag.replace('_', '-')}", default=os.environ.get(env) or default,
                          help=f"${env}, else {default}" + (" (comma-separated)" if "webhooks" in flag else ""))


def _generate(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from certs.generate import CertsError, generate

    try:
        result = generate(Path(args.out), args.service, args.namespace, args.ip, args.days)
    except (CertsError, OSError) as exc:
        print(f"volcano-elastic certs generate: {exc}", file=sys.stderr)
        return 2
    ca = "created a new CA" if result.created_ca else "reused the existing CA (caBundle unchanged)"
    sans = ", ".join(result.dns_names + result.ips)
    print(f"{result.out}: {ca}; serving certificate for {sans}, valid until {result.not_after:%Y-%m-%d}",
          file=sys.stderr)
    return 0


def _inject(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from certs.generate import write_atomic
    from certs.inject import InjectError, ca_bundle, inject_text

    try:
        bundle = ca_bundle(Path(args.ca).read_bytes())
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        output, count = inject_text(text, bundle, args.file)
        if args.in_place and args.file != "-":
            path = Path(args.file)
            write_atomic(path, output.encode(), path.stat().st_mode & 0o777)
        else:
            sys.stdout.write(output)
    except (InjectError, OSError, UnicodeDecodeError) as exc:
        print(f"volcano-elastic certs inject-ca: {exc}", file=sys.stderr)
        return 2
    print(f"caBundle set on {count} webhook(s)", file=sys.stderr)
    return 0


def _expires_within(pem: bytes, days: int, now: datetime.datetime) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return True
    return cert.not_valid_after_utc <= now + datetime.timedelta(days=days)


def _issue(stored: dict[str, bytes], service: str, namespace: str, days: int, renew_days: int,
           now: datetime.datetime) -> dict[str, bytes]:
    """The four files from ``certs generate`` with the stored CA (when it is still good)."""
    import sys
    import tempfile
    from pathlib import Path

    from certs.generate import generate

    with tempfile.TemporaryDirectory(prefix="certgen-") as tmp:
        out = Path(tmp)
        if stored.get("ca.crt") and stored.get("ca.key") and not _expires_within(stored["ca.crt"], renew_days, now):
            (out / "ca.crt").write_bytes(stored["ca.crt"])
            (out / "ca.key").write_bytes(stored["ca.key"])
            (out / "ca.key").chmod(0o600)
        else:
            print(f"{_BOOT} creating a new CA (none stored, or it expires soon)", file=sys.stderr)
        generate(out, service, namespace, (), days, now)
        return {name: (out / name).read_bytes() for name in FILES}


def _bootstrap(args: argparse.Namespace) -> int:
    import base64
    import sys
    from typing import Any

    from certs.generate import CertsError

    from ..kube.client import KubeClient
    from ..kube.errors import AlreadyExistsError, ConflictError, KubeError, NotFoundError
    from ..kube.resources import Resource

    secrets = Resource("", "v1", "secrets", "Secret")
    mutating = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                        "MutatingWebhookConfiguration", namespaced=False)
    validating = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                          "ValidatingWebhookConfiguration", namespaced=False)
    try:
        days, renew_days = int(args.days), int(args.renew_before_days)
    except ValueError:
        fail("certs bootstrap", f"--days and --renew-before-days must be integers, got {args.days!r}, "
             f"{args.renew_before_days!r}")
    namespace, name = args.namespace, args.secret
    now = datetime.datetime.now(datetime.UTC)

    def patch_ca_bundle(res: Resource, hooks: str, ca: bytes) -> None:
        names = [w for w in hooks.split(",") if w]
        if not names:
            return
        bundle = base64.b64encode(ca).decode()
        patch = {"webhooks": [{"name": w, "clientConfig": {"caBundle": bundle}} for w in names]}
        api.patch(res, args.webhook_configuration, patch, patch_type="strategic")
        print(f"{_BOOT} caBundle set on {res.kind} {args.webhook_configuration}: {', '.join(names)}",
              file=sys.stderr)

    api = KubeClient.from_kubeconfig(args.kubeconfig)
    try:
        try:
            existing: dict[str, Any] | None = api.get(secrets, name, namespace)
        except NotFoundError:
            existing = None
        stored = {k: base64.b64decode(v) for k, v in ((existing or {}).get("data") or {}).items() if k in FILES}
        if all(stored.get(k) for k in FILES) and not _expires_within(stored["tls.crt"], renew_days, now):
            print(f"{_BOOT} {namespace}/{name} is valid for more than {renew_days} days: kept", file=sys.stderr)
            files = stored
        else:
            files = _issue(stored, args.service, namespace, days, renew_days, now)
            body: dict[str, Any] = {
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"app.kubernetes.io/part-of": "volcano-elastic",
                                        "app.kubernetes.io/managed-by": "volcano-elastic-certgen"}},
                "data": {k: base64.b64encode(v).decode() for k, v in files.items()},
            }
            if existing is None:
                api.create(secrets, body, namespace)
            elif existing.get("type", "Opaque") != "kubernetes.io/tls":
                fail("certs bootstrap", f"Secret {namespace}/{name} has type {existing.get('type')!r}, not "
                     "kubernetes.io/tls (the type is immutable): delete it and run the Job again", code=1)
            else:
                body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
                api.replace(secrets, name, body, namespace)
            print(f"{_BOOT} {namespace}/{name} written", file=sys.stderr)
        patch_ca_bundle(mutating, args.mutating_webhooks, files["ca.crt"])
        patch_ca_bundle(validating, args.validating_webhooks, files["ca.crt"])
    except (AlreadyExistsError, ConflictError) as exc:
        print(f"{_BOOT} someone else wrote the Secret at the same time, retrying: {exc}", file=sys.stderr)
        return 1
    except (KubeError, CertsError) as exc:
        print(f"{_BOOT} {exc}", file=sys.stderr)
        return 1
    finally:
        api.close()
    return 0


def run(args: argparse.Namespace) -> int:
    if args.certs_command == "generate":
        return _generate(args)
    if args.certs_command == "bootstrap":
        return _bootstrap(args)
    return _inject(args)
