"""A tiny stdlib REST client for the box's own needs (health, CRDs, nodes, webhook config).

Tests use the `kubernetes` package; the box itself needs only the standard library.
"""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
from typing import Any

from .polling import poll_until


class KubeError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str):
        self.status = status
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")


class Kube:
    def __init__(self, host: str, port: int, ca_file: str, cert_file: str, key_file: str):
        self.host, self.port = host, port
        self.ctx = ssl.create_default_context(cafile=ca_file)
        self.ctx.load_cert_chain(cert_file, key_file)

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                query: dict[str, str] | None = None, timeout: float = 15.0,
                ok: tuple[int, ...] = (200, 201, 202)) -> Any:
        if query:
            path = path + "?" + urllib.parse.urlencode(query)
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            headers["Content-Type"] = content_type
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        if resp.status not in ok:
            raise KubeError(resp.status, method, path, raw)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def create(self, path: str, obj: dict, *, exist_ok: bool = True) -> Any:
        try:
            return self.request("POST", path, obj)
        except KubeError as e:
            if e.status == 409 and exist_ok:
                return None
            raise

    def apply(self, path: str, obj: dict, manager: str = "volcano-elastic-localbox") -> Any:
        """Server-side apply (PATCH application/apply-patch+yaml; JSON is valid YAML)."""
        return self.request("PATCH", path, obj, content_type="application/apply-patch+yaml",
                            query={"fieldManager": manager, "force": "true"})

    def wait_for(self, what: str, fn, timeout: float, interval: float = 0.25) -> Any:
        return poll_until(what, fn, timeout, interval, retry=(KubeError, OSError, http.client.HTTPException))


def http_ok(url: str, timeout: float = 2.0, expect: str | None = None) -> bool:
    """GET url (http or https, certificate not verified: local health endpoints)."""
    u = urllib.parse.urlsplit(url)
    if u.scheme == "https":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=timeout)
    else:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("GET", u.path or "/")
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace")
        return resp.status == 200 and (expect is None or expect in body)
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
