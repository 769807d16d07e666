"""Certificates for the box, made with `cryptography` (no openssl/cfssl needed)."""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.x509 import certificate_builder

_ONE_DAY = _dt.timedelta(days=1)


@dataclass
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def write(self, cert_path: Path, key_path: Path) -> None:
        _write(cert_path, self.cert_pem, 0o644)
        _write(key_path, self.key_pem, 0o600)


def _write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _new_key(kind: str):
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key, kind: str) -> bytes:
    # RSA keys as PKCS#1 ("RSA PRIVATE KEY"): some consumers (cert-controller, used by the
    # training operator) only parse that form.
    fmt = serialization.PrivateFormat.TraditionalOpenSSL
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())


def _name(cn: str, orgs: list[str] | tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, key, days: int, *, ca: bool) -> x509.CertificateBuilder:
    """A certificate for ``key``: a fresh serial, valid from a day ago for ``days``, a CA or not
    (basic constraints), keys usable for signatures and key encipherment (and, for a CA, for signing
    certificates and CRLs)."""
    now = _dt.datetime.now(_dt.UTC)
    return (
        certificate_builder(subject, issuer, key, now - _ONE_DAY, now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                          data_encipherment=False, key_agreement=False, key_cert_sign=ca,
                          crl_sign=ca, encipher_only=False, decipher_only=False),
            critical=True,
        )
    )


def make_ca(cn: str, *, days: int = 3650, key_kind: str = "ec", dns_names: list[str] | None = None,
            orgs: list[str] | tuple[str, ...] = ()) -> KeyPair:
    key = _new_key(key_kind)
    b = _builder(_name(cn, orgs), _name(cn, orgs), key, days, ca=True).add_extension(
        x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if dns_names:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns_names]), critical=False)
    cert = b.sign(key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key, key_kind))


def issue(ca: KeyPair, cn: str, *, orgs: list[str] | tuple[str, ...] = (), dns_names: list[str] = (),
          ips: list[str] = (), server: bool = True, client: bool = False, days: int = 3650,
          key_kind: str = "ec") -> KeyPair:
    """A leaf certificate signed by `ca` (server and/or client usage, DNS and IP SANs)."""
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    ca_cert = ca.cert
    key = _new_key(key_kind)
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    b = (
        _builder(_name(cn, orgs), ca_cert.subject, key, days, ca=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key, key_kind))


def rsa_keypair_pem() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) for service-account token signing."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return priv, pub
