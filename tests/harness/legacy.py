"""The three queue keys the judge chose as defaults (issue 38: ``wholeGangUpTo: 4``,
``elasticMinShare: 0.5``, ``noticeSeconds: 60``) pinned to their values before: every job elastic
from its min, no limit on the min sets, victims evicted at once.

A test of another mechanism (gating, evictions, stamps, the shrink of a small job) whose scenario was
written for that behaviour pins these in its own configuration, in whichever form it writes it."""

from __future__ import annotations

from typing import Any

from elastic_controller.policy.settings import ElasticConfig, QueuePolicy

# The keys and their values before issue 38 made the judge's row the default.
LEGACY: dict[str, Any] = {"wholeGangUpTo": 0, "elasticMinShare": 1.0, "noticeSeconds": 0}
# The same as YAML flow-mapping entries, to put inside a ``defaults: {...}`` a test writes.
LEGACY_FLOW = "wholeGangUpTo: 0, elasticMinShare: 1, noticeSeconds: 0"
# The same as the chart's ``--set-json`` values (tests/harness/realstack.py).
LEGACY_SETS = ("config.defaults.wholeGangUpTo=0", "config.defaults.elasticMinShare=1",
               "config.defaults.noticeSeconds=0")


def legacy_policy(**overrides: Any) -> QueuePolicy:
    """A queue policy with the old values of the three keys, then ``overrides``."""
    return QueuePolicy(**{**LEGACY, **overrides})


def legacy_config(**overrides: Any) -> ElasticConfig:
    """An ElasticConfig whose ``defaults`` is ``legacy_policy(**overrides)``."""
    return ElasticConfig(defaults=legacy_policy(**overrides))


def legacy_defaults(defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """A config's ``defaults`` mapping (for ``parse_config``) with the old values under ``defaults``."""
    return {**LEGACY, **(defaults or {})}
