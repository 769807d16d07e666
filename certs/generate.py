"""``certs generate``: write ``ca.crt``/``ca.key`` (kept for renewal) and ``tls.crt``/``tls.key``.

With an existing CA in the directory only the serving certificate is renewed, so the
``caBundle`` already registered with the API server stays valid. Every file is written to a
temporary name and renamed into place (a reader never sees half a file); keys are 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .x509 import KeyPair, load_pair, new_ca, new_serving_cert, service_dns_names

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"


class CertsError(ValueError):
    """Inputs or files we cannot generate from; the message says what to do."""


@dataclass(frozen=True, slots=True)
class GenerateResult:
    out: Path
    created_ca: bool
    dns_names: tuple[str, ...]
    ips: tuple[str, ...]
    not_after: datetime.datetime


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def parse_ips(values: Sequence[str]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    ips = []
    for value in values:
        try:
            ips.append(ipaddress.ip_address(value))
        except ValueError as exc:
            raise CertsError(f"--ip {value!r} is not an IP address") from exc
    return ips


def _existing_ca(out: Path) -> KeyPair | None:
    ca_crt, ca_key = out / CA_CERT, out / CA_KEY
    if not ca_crt.exists() and not ca_key.exists():
        return None
    if not ca_key.exists():
        raise CertsError(f"{ca_crt} exists but {ca_key} does not: cannot sign a renewal without the CA key "
                         f"(remove {ca_crt} to start over with a new CA, then re-inject the caBundle)")
    if not ca_crt.exists():
        raise CertsError(f"{ca_key} exists but {ca_crt} does not: remove {ca_key} to create a new CA")
    try:
        return load_pair(ca_crt.read_bytes(), ca_key.read_bytes())
    except ValueError as exc:
        raise CertsError(f"cannot use the CA in {out}: {exc}") from exc


# A Service name is an RFC 1035 label, a namespace an RFC 1123 label: anything else is no name the
# API server would accept, and a certificate for it would match no client's request.
_SERVICE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_names(service: str, namespace: str) -> None:
    """CertsError unless ``service`` is a valid Service name and ``namespace`` a valid namespace."""
    if not _SERVICE.match(service):
        raise CertsError(f"--service {service!r} is not a valid Service name (an RFC 1035 label: at most 63 "
                         "lowercase letters, digits and '-', starting with a letter, ending with a letter or digit)")
    if not _NAMESPACE.match(namespace):
        raise CertsError(f"--namespace {namespace!r} is not a valid namespace (an RFC 1123 label: at most 63 "
                         "lowercase letters, digits and '-', starting and ending with a letter or digit)")


def generate(
    out: Path,
    service: str,
    namespace: str,
    ips: Sequence[str] = (),
    days: int = 365,
    now: datetime.datetime | None = None,
) -> GenerateResult:
    if not service or not namespace:
        raise CertsError("--service and --namespace must be non-empty")
    check_names(service, namespace)
    if days < 1:
        raise CertsError(f"--days must be at least 1, got {days}")
    now = now or datetime.datetime.now(datetime.UTC)
    addresses = parse_ips(ips)
    out.mkdir(parents=True, exist_ok=True)
    ca = _existing_ca(out)
    created = ca is None
    if ca is None:
        ca = new_ca(f"volcano-elastic webhook CA ({service}.{namespace})", now)
    elif ca.cert.not_valid_after_utc <= now + datetime.timedelta(days=1):
        raise CertsError(f"the CA in {out} expires {ca.cert.not_valid_after_utc:%Y-%m-%d}: remove "
                         f"{out / CA_CERT} and {out / CA_KEY} to create a new one, then re-inject the caBundle")
    dns = service_dns_names(service, namespace)
    serving = new_serving_cert(ca, dns, addresses, now, days)
    if created:
        write_atomic(out / CA_KEY, ca.key_pem(), 0o600)
        write_atomic(out / CA_CERT, ca.cert_pem(), 0o644)
    # Key first, then certificate: the server keeps the old pair until both load together.
    write_atomic(out / TLS_KEY, serving.key_pem(), 0o600)
    write_atomic(out / TLS_CERT, serving.cert_pem(), 0o644)
    return GenerateResult(
        out=out,
        created_ca=created,
        dns_names=tuple(dns),
        ips=tuple(str(a) for a in addresses),
        not_after=serving.cert.not_valid_after_utc,
    )
