"""certs generate / inject-ca: SANs, chain, permissions, renewal with the same CA, caBundle."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs.generate import CertsError, generate
from certs.inject import InjectError, ca_bundle, inject_text
from elastic_controller.cli import main


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_generate_writes_a_chain_the_api_server_accepts(tmp_path: Path) -> None:
    assert main(["certs", "generate", "--service", "ve", "--namespace", "sys", "--out", str(tmp_path),
                 "--ip", "127.0.0.1", "--ip", "::1", "--days", "30"]) == 0
    ca, tls = load(tmp_path / "ca.crt"), load(tmp_path / "tls.crt")
    tls.verify_directly_issued_by(ca)
    sans = tls.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = sans.get_values_for_type(x509.DNSName)
    assert "ve.sys.svc" in dns and "ve.sys.svc.cluster.local" in dns
    assert set(sans.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"),
                                                             ipaddress.ip_address("::1")}
    assert ExtendedKeyUsageOID.SERVER_AUTH in tls.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not tls.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    life = tls.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(days=29) < life <= datetime.timedelta(days=30)
    for key in ("tls.key", "ca.key"):
        assert stat.S_IMODE((tmp_path / key).stat().st_mode) == 0o600


def test_rerun_renews_only_the_serving_certificate(tmp_path: Path) -> None:
    first = generate(tmp_path, "ve", "sys")
    ca_before, tls_before = (tmp_path / "ca.crt").read_bytes(), load(tmp_path / "tls.crt")
    second = generate(tmp_path, "ve", "sys")
    assert first.created_ca and not second.created_ca
    assert (tmp_path / "ca.crt").read_bytes() == ca_before
    tls_after = load(tmp_path / "tls.crt")
    assert tls_after.serial_number != tls_before.serial_number
    tls_after.verify_directly_issued_by(load(tmp_path / "ca.crt"))


def test_serving_cert_never_outlives_the_ca(tmp_path: Path) -> None:
    generate(tmp_path, "ve", "sys", days=100_000)
    assert load(tmp_path / "tls.crt").not_valid_after_utc <= load(tmp_path / "ca.crt").not_valid_after_utc


@pytest.mark.parametrize(("setup", "kwargs", "needle"), [
    (lambda d: (d / "ca.crt").write_text("x"), {}, "ca.key"),
    (lambda d: (d / "ca.key").write_text("x"), {}, "ca.crt"),
    (lambda d: None, {"ips": ["not-an-ip"]}, "not an IP"),
    (lambda d: None, {"days": 0}, "--days"),
], ids=["ca.crt without key", "ca.key without cert", "bad ip", "zero days"])
def test_generate_refuses_with_a_reason(tmp_path: Path, setup: object, kwargs: dict[str, object],
                                        needle: str) -> None:
    setup(tmp_path)  # type: ignore[operator]
    with pytest.raises(CertsError, match=needle):
        generate(tmp_path, "ve", "sys", **kwargs)  # type: ignore[arg-type]


def test_cli_exit_code_2_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "generate", "--service", "ve", "--namespace", "sys", "--out", str(tmp_path),
                 "--ip", "nope"]) == 2
    assert "not an IP" in capsys.readouterr().err


MANIFEST = """\
apiVersion: v1
kind: Service
metadata: {name: ve, namespace: sys}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: ve}
webhooks:
- name: pods.volcano-elastic.io
  clientConfig: {service: {name: ve, namespace: sys, path: /mutate-pods}, caBundle: b2xk}
- name: pods2.volcano-elastic.io
  clientConfig: {service: {name: ve, namespace: sys, path: /mutate-pods}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: ve}
webhooks:
- name: jobs.volcano-elastic.io
  clientConfig: {url: "https://127.0.0.1:8443/validate-pytorchjobs"}
"""


def test_inject_sets_every_webhook_and_keeps_other_documents(tmp_path: Path) -> None:
    generate(tmp_path, "ve", "sys")
    pem = (tmp_path / "ca.crt").read_bytes()
    out, count = inject_text(MANIFEST, ca_bundle(pem))
    docs = list(yaml.safe_load_all(out))
    assert count == 3
    assert docs[0]["kind"] == "Service"
    bundles = [w["clientConfig"]["caBundle"] for d in docs[1:] for w in d["webhooks"]]
    assert bundles == [base64.b64encode(pem).decode()] * 3
    assert docs[1]["webhooks"][0]["clientConfig"]["service"]["path"] == "/mutate-pods"


def test_inject_cli_stdout_and_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generate(tmp_path, "ve", "sys")
    manifest = tmp_path / "webhooks.yaml"
    manifest.write_text(MANIFEST)
    assert main(["certs", "inject-ca", "--ca", str(tmp_path / "ca.crt"), str(manifest)]) == 0
    printed = capsys.readouterr().out
    assert manifest.read_text() == MANIFEST  # stdout by default
    assert main(["certs", "inject-ca", "--ca", str(tmp_path / "ca.crt"), "--in-place", str(manifest)]) == 0
    assert manifest.read_text() == printed


def test_inject_in_a_list(tmp_path: Path) -> None:
    generate(tmp_path, "ve", "sys")
    docs = {"apiVersion": "v1", "kind": "List", "items": list(yaml.safe_load_all(MANIFEST))}
    _, count = inject_text(yaml.safe_dump(docs), ca_bundle((tmp_path / "ca.crt").read_bytes()))
    assert count == 3


def test_inject_refuses_without_webhooks_or_with_a_bad_ca(tmp_path: Path) -> None:
    with pytest.raises(InjectError, match="no webhook"):
        inject_text("kind: Service\n", "eA==")
    with pytest.raises(InjectError, match="PEM"):
        ca_bundle(b"not a certificate")
    with pytest.raises(InjectError, match="YAML"):
        inject_text("a: [", "eA==")


def test_long_service_and_namespace_names(tmp_path: Path) -> None:
    # A commonName is capped at 64 characters; the SANs carry the full names.
    service, namespace = "volcano-elastic-webhook", "volcano-elastic-system-with-a-long-name"
    generate(tmp_path, service, namespace)
    sans = load(tmp_path / "tls.crt").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{service}.{namespace}.svc.cluster.local" in sans.get_values_for_type(x509.DNSName)


def test_bootstrap_renews_with_the_stored_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    """``certs bootstrap``'s issuing step (the part without the API): a stored CA that is still good
    signs the new serving certificate (the registered caBundle stays valid); one about to expire is
    replaced; the flags default to the certgen Job's environment variables."""
    from elastic_controller.cli import build_parser
    from elastic_controller.cli.certs import FILES, _expires_within, _issue

    now = datetime.datetime.now(datetime.UTC)
    first = _issue({}, "volcano-elastic-webhook", "ns", 365, 30, now)
    assert set(first) == set(FILES)
    assert not _expires_within(first["tls.crt"], 30, now) and _expires_within(first["tls.crt"], 400, now)
    again = _issue(first, "volcano-elastic-webhook", "ns", 365, 30, now)
    assert again["ca.crt"] == first["ca.crt"] and again["tls.crt"] != first["tls.crt"]
    replaced = _issue(first, "volcano-elastic-webhook", "ns", 365, 100 * 365, now)  # the CA "expires soon"
    assert replaced["ca.crt"] != first["ca.crt"]
    assert _expires_within(b"not a certificate", 30, now)

    monkeypatch.setenv("POD_NAMESPACE", "elsewhere")
    monkeypatch.setenv("RENEW_BEFORE_DAYS", "7")
    args = build_parser().parse_args(["certs", "bootstrap"])
    assert (args.namespace, args.renew_before_days, args.secret) == ("elsewhere", "7", "volcano-elastic-webhook-tls")
