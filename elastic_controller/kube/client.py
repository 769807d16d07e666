"""One shared API client speaking plain JSON dicts (what ``policy.parse`` reads).

Every request has a timeout, so a dead connection never hangs a caller; the connection pool
is bounded; failures surface as ``errors.KubeError`` subclasses, never as library exceptions.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .clock import ServerClock
from .errors import AlreadyExistsError, ConflictError, KubeError, UnavailableError, error_for
from .resources import PODS, Resource

log = logging.getLogger(__name__)

PatchType = Literal["merge", "strategic", "json"]
_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
FIELD_MANAGER = "volcano-elastic"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ClientSettings:
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    pool_size: int = 24  # each watch holds one connection; workers share the rest
    list_page_size: int = 500


class KubeClient:
    """Thin JSON client over ``kubernetes.client.ApiClient`` (built once, passed down)."""

    def __init__(self, api_client: Any, settings: ClientSettings | None = None,
                 local_time: Callable[[], float] = time.time) -> None:
        self._api = api_client
        self.settings = settings or ClientSettings()
        self.local_time = local_time  # this process's clock (tests shift it)
        self.clock = ServerClock(local_time)  # the API server's, from every answer's Date header

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None = None, settings: ClientSettings | None = None,
                        context: str | None = None) -> KubeClient:
        """Kubeconfig given, else $KUBECONFIG / ~/.kube/config, else the in-cluster service account."""
        from kubernetes import client as kclient
        from kubernetes import config as kconfig

        settings = settings or ClientSettings()
        conf = kclient.Configuration()
        try:
            path = kubeconfig or os.environ.get("KUBECONFIG") or None
            if path is None and not os.path.exists(os.path.expanduser("~/.kube/config")) and \
                    os.environ.get("KUBERNETES_SERVICE_HOST"):
                kconfig.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
            else:
                kconfig.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=path, context=context, client_configuration=conf, persist_config=False)
        except (kconfig.ConfigException, OSError) as exc:
            raise KubeError(f"cannot load a kubeconfig ({kubeconfig or 'default'}): {exc}") from exc
        conf.connection_pool_maxsize = settings.pool_size
        conf.retries = 0  # we retry ourselves, with backoff, where it is safe
        api = kclient.ApiClient(conf)
        api.user_agent = "volcano-elastic"
        return cls(api, settings)

    def close(self) -> None:
        try:
            self._api.close()
        except Exception:  # pragma: no cover - best effort at shutdown
            log.debug("closing the API client failed", exc_info=True)

    # ------------------------------------------------------------------ raw requests
    def _send(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
              body: Any = None, content_type: str = "application/json",
              timeout: float | tuple[float, float] | None = None, stream: bool = False) -> Any:
        from kubernetes.client.exceptions import ApiException

        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json", "Content-Type": content_type}
        what = f"{method} {path}"
        try:
            m, url, hdrs, payload, _ = self._api.param_serialize(
                method, path, query_params=params, header_params=headers, body=body,
                auth_settings=["BearerToken"])
            sent = self.local_time()
            resp = self._api.call_api(
                m, url, header_params=hdrs, body=payload,
                _request_timeout=timeout or (self.settings.connect_timeout, self.settings.read_timeout))
            self.clock.observe(_date_header(resp), sent, self.local_time())
        except ApiException as exc:
            raise error_for(exc.status or 0, exc.body, what) from exc
        except Exception as exc:  # urllib3 errors: refused, reset, timeout, TLS
            raise UnavailableError(f"{what}: {type(exc).__name__}: {exc}") from exc
        if stream:
            if resp.status >= 300:
                data = resp.read()
                raise error_for(resp.status, data, what)
            return resp.response
        try:
            data = resp.read()
        except Exception as exc:
            raise UnavailableError(f"{what}: reading the answer: {exc}") from exc
        if resp.status >= 300:
            raise error_for(resp.status, data, what)
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError as exc:
            raise KubeError(f"{what}: answer is not JSON", resp.status) from exc

    # ------------------------------------------------------------------ verbs
    def list(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """All objects (paged) and the list's resourceVersion. Items get apiVersion/kind set."""
        items: list[dict[str, Any]] = []
        cont: str | None = None
        rv = ""
        while True:
            out = self._send("GET", res.path(namespace), query={
                "labelSelector": label_selector, "fieldSelector": field_selector,
                "limit": self.settings.list_page_size, "continue": cont})
            for item in out.get("items") or []:
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(item)
            meta = out.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or rv)
            cont = meta.get("continue") or None
            if not cont:
                return items, rv

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj: dict[str, Any] = self._send("GET", res.path(namespace, name))
        return obj

    def create(self, res: Resource, body: Mapping[str, Any], namespace: str | None = None, *,
               dry_run: bool = False) -> dict[str, Any]:
        payload = {"apiVersion": res.api_version, "kind": res.kind, **body}
        obj: dict[str, Any] = self._send("POST", res.path(namespace), body=payload, query={
            "dryRun": "All" if dry_run else None, "fieldManager": FIELD_MANAGER})
        return obj

    def replace(self, res: Resource, name: str, body: Mapping[str, Any],
                namespace: str | None = None) -> dict[str, Any]:
        obj: dict[str, Any] = self._send("PUT", res.path(namespace, name), body=dict(body),
                                         query={"fieldManager": FIELD_MANAGER})
        return obj

    def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
              patch_type: PatchType = "merge", dry_run: bool = False,
              subresource: str | None = None) -> dict[str, Any]:
        obj: dict[str, Any] = self._send(
            "PATCH", res.path(namespace, name, subresource), body=patch, content_type=_CONTENT_TYPES[patch_type],
            query={"dryRun": "All" if dry_run else None, "fieldManager": FIELD_MANAGER})
        return obj

    def delete(self, res: Resource, name: str, namespace: str | None = None, *, uid: str | None = None,
               propagation: str | None = "Background", dry_run: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if propagation:
            body["propagationPolicy"] = propagation
        if dry_run:
            body["dryRun"] = ["All"]
        obj: dict[str, Any] = self._send("DELETE", res.path(namespace, name), body=body)
        return obj

    def evict(self, namespace: str, name: str, *, uid: str | None = None, dry_run: bool = False) -> None:
        """POST pods/NAME/eviction (policy/v1): PDBs are honoured (429 when one refuses)."""
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        options: dict[str, Any] = {}
        if uid:
            options["preconditions"] = {"uid": uid}
        if dry_run:
            options["dryRun"] = ["All"]
        if options:
            body["deleteOptions"] = options
        self._send("POST", PODS.path(namespace, name, "eviction"), body=body,
                   query={"dryRun": "All" if dry_run else None})

    def watch(self, res: Resource, resource_version: str, namespace: str | None = None, *,
              timeout_seconds: int = 300, label_selector: str | None = None) -> Iterator[dict[str, Any]]:
        """Watch events from ``resource_version`` (bookmarks included) until the server ends the stream.

        Raises GoneError on 410 (the caller relists) and UnavailableError when the connection dies.
        """
        from kubernetes.watch.watch import iter_resp_lines

        raw = self._send("GET", res.path(namespace), query={
            "watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds, "labelSelector": label_selector},
            timeout=(self.settings.connect_timeout, timeout_seconds + self.settings.read_timeout),
            stream=True)
        what = f"watch {res.plural}"
        try:
            for line in iter_resp_lines(raw):  # type: ignore[no-untyped-call]
                if not line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    log.warning("undecodable watch line", extra={"resource": res.plural})
                    continue
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise error_for(int(status.get("code") or 500), json.dumps(status), what)
                obj = event.get("object")
                if isinstance(obj, dict):
                    obj.setdefault("apiVersion", res.api_version)
                    obj.setdefault("kind", res.kind)
                yield event
        except KubeError:
            raise
        except Exception as exc:  # protocol errors, read timeouts, resets
            raise UnavailableError(f"{what}: stream broke: {type(exc).__name__}: {exc}") from exc
        finally:
            try:
                raw.release_conn()
            except Exception:  # pragma: no cover
                pass


def _date_header(resp: Any) -> str | None:
    getheader = getattr(resp, "getheader", None)
    try:
        value = getheader("Date") if getheader is not None else None
    except Exception:  # pragma: no cover - a response object without headers
        return None
    return str(value) if value else None


def retry_on_conflict(fn: Callable[[], T], *, attempts: int = 5, base_delay: float = 0.05,
                      sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``fn`` again (with jittered backoff) while it raises ConflictError; other errors pass."""
    for attempt in range(attempts):
        try:
            return fn()
        except AlreadyExistsError:
            raise
        except ConflictError:
            if attempt == attempts - 1:
                raise
            sleep(base_delay * (2**attempt) * (1 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover
