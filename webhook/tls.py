"""The server's TLS context, and picking up rotated certificate files without a restart.

gunicorn asks for an SSL context for every new connection (its ``ssl_context`` hook).
``CertReloader.context()`` stats the two files and rebuilds the context only when they
changed; connections already open keep the context they were accepted with, so nothing in
flight is dropped. A pair that does not load (say the certificate is replaced but the key not
yet) keeps the previous context until the files load together, which also covers writers
that do not replace both files at once.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading

log = logging.getLogger("volcano_elastic.webhook.tls")

# TLS 1.2 suites: forward-secret AEAD only (TLS 1.3 suites are all strong and not configurable here).
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!DSS:!SHA1:!RC4:!3DES"

Signature = tuple[tuple[int, int, int, int] | None, ...]


def server_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """TLS 1.2+, strong ciphers, no compression or renegotiation; raises OSError/ssl.SSLError."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_RENEGOTIATION
    ctx.load_cert_chain(certfile=certfile, keyfile=keyfile)
    return ctx


def _stat(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)  # follows symlinks: a Secret volume swaps its ..data link
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


class CertReloader:
    def __init__(self, certfile: str, keyfile: str) -> None:
        self.certfile = certfile
        self.keyfile = keyfile
        self._lock = threading.Lock()
        self._signature: Signature = self._current()
        self._failed: Signature | None = None
        self._context = server_context(certfile, keyfile)
        self.reloads = 0

    def _current(self) -> Signature:
        return (_stat(self.certfile), _stat(self.keyfile))

    def context(self) -> ssl.SSLContext:
        signature = self._current()
        if signature == self._signature or signature == self._failed:
            return self._context
        with self._lock:
            if signature not in (self._signature, self._failed):
                self._reload(signature)
            return self._context

    def _reload(self, signature: Signature) -> None:
        try:
            context = server_context(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as exc:
            self._failed = signature
            log.warning(
                "certificate files changed but do not load; serving the previous certificate",
                extra={"fields": {"certFile": self.certfile, "keyFile": self.keyfile, "error": str(exc)}},
            )
            return
        self._context, self._signature, self._failed = context, signature, None
        self.reloads += 1
        log.info("serving certificate reloaded", extra={"fields": {"certFile": self.certfile}})


_reloaders: dict[tuple[str, str], CertReloader] = {}
_reloaders_lock = threading.Lock()


def reloader_for(certfile: str, keyfile: str) -> CertReloader:
    """One reloader per process and file pair (gunicorn workers each build their own after fork)."""
    key = (certfile, keyfile)
    with _reloaders_lock:
        if key not in _reloaders:
            _reloaders[key] = CertReloader(certfile, keyfile)
        return _reloaders[key]
