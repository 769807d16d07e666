"""``certs inject-ca``: set ``caBundle`` on every webhook of the webhook configurations in YAML.

Multi-document YAML in, the same documents out (``kind: List`` items included); documents of
other kinds pass through unchanged. Comments are not preserved (PyYAML).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import yaml
from cryptography import x509

WEBHOOK_KINDS = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})


class InjectError(ValueError):
    """Input we cannot inject into; the message names the file and the document."""


def ca_bundle(ca_pem: bytes) -> str:
    """base64 of the PEM, after checking that it holds at least one certificate."""
    try:
        certs = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as exc:
        raise InjectError(f"the CA file is not a PEM certificate: {exc}") from exc
    if not certs:
        raise InjectError("the CA file holds no certificate")
    return base64.b64encode(ca_pem).decode("ascii")


def _configurations(doc: Any) -> Iterable[dict[str, Any]]:
    if not isinstance(doc, dict):
        return
    if doc.get("kind") in WEBHOOK_KINDS:
        yield doc
    elif doc.get("kind") == "List" or str(doc.get("kind", "")).endswith("List"):
        for item in doc.get("items") or []:
            yield from _configurations(item)


def inject(docs: list[Any], bundle: str) -> int:
    """Set ``clientConfig.caBundle`` of every webhook in ``docs`` (in place); returns how many."""
    count = 0
    for config in _iter_all(docs):
        name = (config.get("metadata") or {}).get("name", "?")
        webhooks = config.get("webhooks")
        if not isinstance(webhooks, list):
            raise InjectError(f"{config['kind']} {name}: webhooks is not a list")
        for i, webhook in enumerate(webhooks):
            if not isinstance(webhook, dict):
                raise InjectError(f"{config['kind']} {name}: webhooks[{i}] is not a mapping")
            client = webhook.setdefault("clientConfig", {})
            if not isinstance(client, dict):
                raise InjectError(f"{config['kind']} {name}: webhooks[{i}].clientConfig is not a mapping")
            client["caBundle"] = bundle
            count += 1
    return count


def _iter_all(docs: list[Any]) -> Iterable[dict[str, Any]]:
    for doc in docs:
        yield from _configurations(doc)


def inject_text(text: str, bundle: str, source: str = "input") -> tuple[str, int]:
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise InjectError(f"{source}: not valid YAML: {exc}".replace("\n", " ")) from exc
    count = inject(docs, bundle)
    if count == 0:
        raise InjectError(f"{source}: no webhook in a MutatingWebhookConfiguration or "
                          f"ValidatingWebhookConfiguration")
    kept = [d for d in docs if d is not None]
    return yaml.safe_dump_all(kept, sort_keys=False, default_flow_style=False), count
