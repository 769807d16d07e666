"""The bundled plan examples (examples/plan/NAME.json: kubectl JSON dumps of small clusters), the time
they are planned at, and their objects parsed into a policy Snapshot."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.parse import parse_objects
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.legacy import legacy_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plan"
PLANNED_AT = "2026-01-01T13:00:00Z"  # the time the bundled examples are planned at (their README)
NOW = datetime.fromisoformat(PLANNED_AT)


def example_items(name: str) -> list[dict[str, Any]]:
    """The objects of examples/plan/``name``.json (a fresh copy each call)."""
    return list(json.loads((EXAMPLES / f"{name}.json").read_text())["items"])


def snapshot_of(items: list[dict[str, Any]], cfg: ElasticConfig | None = None) -> Snapshot:
    return parse_objects(items, cfg or legacy_config())[0]


def example_snapshot(name: str, edit: Callable[[list[dict[str, Any]]], object] | None = None,
                     cfg: ElasticConfig | None = None) -> Snapshot:
    """examples/plan/``name``.json parsed, after ``edit`` changed its objects in place."""
    items = example_items(name)
    if edit is not None:
        edit(items)
    return snapshot_of(items, cfg)
