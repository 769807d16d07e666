"""CertReloader: rotated files are picked up, a half-rotated pair keeps the old context."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest

from certs.generate import generate
from webhook.tls import CIPHERS, CertReloader, server_context


def serial(ctx: ssl.SSLContext) -> int:
    # The context does not expose its certificate; a loopback handshake does.
    import socket

    from cryptography import x509

    client = ssl.create_default_context()
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    a, b = socket.socketpair()
    with a, b:
        server_side = ctx.wrap_socket(a, server_side=True, do_handshake_on_connect=False)
        client_side = client.wrap_socket(b, do_handshake_on_connect=False)
        server_side.setblocking(False)
        client_side.setblocking(False)
        for _ in range(100):
            done = 0
            for s in (client_side, server_side):
                try:
                    s.do_handshake()
                    done += 1
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
            if done == 2:
                break
        der = client_side.getpeercert(binary_form=True)
        assert der is not None
        return int(x509.load_der_x509_certificate(der).serial_number)


def pem_serial(path: Path) -> int:
    from cryptography import x509

    return int(x509.load_pem_x509_certificate(path.read_bytes()).serial_number)


def test_reloads_when_files_change(tmp_path: Path) -> None:
    generate(tmp_path, "ve", "ns")
    reloader = CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    first = reloader.context()
    assert reloader.context() is first  # unchanged files: same context, no reload
    generate(tmp_path, "ve", "ns")
    second = reloader.context()
    assert second is not first and reloader.reloads == 1
    assert serial(second) == pem_serial(tmp_path / "tls.crt")


def test_half_rotated_pair_keeps_the_previous_context(tmp_path: Path) -> None:
    generate(tmp_path, "ve", "ns")
    reloader = CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    first = reloader.context()
    other = tmp_path / "other"
    generate(other, "ve", "ns")
    os.replace(other / "tls.crt", tmp_path / "tls.crt")  # new certificate, old key
    assert reloader.context() is first
    assert reloader.context() is first  # the failed pair is not retried on every connection
    os.replace(other / "tls.key", tmp_path / "tls.key")  # now both
    assert reloader.context() is not first
    assert serial(reloader.context()) == pem_serial(tmp_path / "tls.crt")


def test_secret_volume_symlink_swap(tmp_path: Path) -> None:
    # kubelet writes a Secret volume as ..data -> ..timestamp/ and tls.crt -> ..data/tls.crt
    v1, v2 = tmp_path / "..v1", tmp_path / "..v2"
    generate(v1, "ve", "ns")
    generate(v2, "ve", "ns")
    (tmp_path / "..data").symlink_to(v1.name)
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).symlink_to(f"..data/{name}")
    reloader = CertReloader(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    assert serial(reloader.context()) == pem_serial(v1 / "tls.crt")
    (tmp_path / "..tmp").symlink_to(v2.name)
    os.replace(tmp_path / "..tmp", tmp_path / "..data")
    assert serial(reloader.context()) == pem_serial(v2 / "tls.crt")


def test_server_context_policy(tmp_path: Path) -> None:
    generate(tmp_path, "ve", "ns")
    ctx = server_context(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    names = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names and all(("GCM" in n or "CHACHA20" in n) and n.startswith("ECDHE") for n in names)
    assert "!SHA1" in CIPHERS


def test_unloadable_pair_at_start_raises(tmp_path: Path) -> None:
    with pytest.raises((OSError, ssl.SSLError)):
        CertReloader(str(tmp_path / "nope.crt"), str(tmp_path / "nope.key"))
