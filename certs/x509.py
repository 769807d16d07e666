"""Building the CA and serving certificates (``cryptography``); no file I/O here.

Keys are ECDSA P-256: accepted by the API server's Go TLS client and cheap to handshake.
The serving certificate names the Service the way the API server dials it.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
BACKDATE = datetime.timedelta(minutes=5)  # tolerate clock skew between us and the API server

PrivateKey = ec.EllipticCurvePrivateKey


@dataclass(frozen=True, slots=True)
class KeyPair:
    key: PrivateKey
    cert: x509.Certificate

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server dials first (``NAME.NS.svc``), then the shorter in-cluster forms."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", service,
            f"{service}.{namespace}"]


def _new_key() -> PrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def certificate_builder(subject: x509.Name, issuer: x509.Name, key: PrivateKey, not_before: datetime.datetime,
                        not_after: datetime.datetime) -> x509.CertificateBuilder:
    """A certificate for ``key`` with a fresh serial, valid from ``not_before`` to ``not_after``; no
    extensions yet (also the test box's, hack/localbox/pki.py)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )


def _key_usage(ca: bool) -> x509.KeyUsage:
    """Digital signature; for a CA also certificate and CRL signing; nothing else."""
    return x509.KeyUsage(
        digital_signature=True, key_cert_sign=ca, crl_sign=ca, content_commitment=False,
        key_encipherment=False, data_encipherment=False, key_agreement=False,
        encipher_only=False, decipher_only=False,
    )


def new_ca(common_name: str, now: datetime.datetime, days: int = CA_DAYS) -> KeyPair:
    key = _new_key()
    # X.509 caps a commonName at 64 characters; clients match SANs, so the CN is only a label.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        certificate_builder(name, name, key, now - BACKDATE, now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(key, cert)


def new_serving_cert(
    ca: KeyPair,
    dns_names: Sequence[str],
    ips: Sequence[ipaddress.IPv4Address | ipaddress.IPv6Address],
    now: datetime.datetime,
    days: int,
) -> KeyPair:
    """A server certificate signed by ``ca``; never valid beyond the CA itself."""
    key = _new_key()
    not_after = min(now + datetime.timedelta(days=days), ca.cert.not_valid_after_utc)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ips]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0][:64])])
    cert = (
        certificate_builder(subject, ca.cert.subject, key, now - BACKDATE, not_after)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return KeyPair(key, cert)


def load_pair(cert_pem: bytes, key_pem: bytes) -> KeyPair:
    """Raises ValueError when the PEM is unreadable, not EC P-256-or-compatible, or the two do not match."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
        raise ValueError("the CA key does not belong to the CA certificate")
    return KeyPair(key, cert)
