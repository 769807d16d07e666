"""Load the ElasticConfig document: strict, every problem reported with its path."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .policy.admission import ADMISSION
from .policy.settings import (
    ORDER_BY,
    SHARE_PLUGINS,
    AgentConfig,
    ElasticConfig,
    GatingConfig,
    PrioritiesConfig,
    QueuePolicy,
    SharesConfig,
)

API_VERSION = "volcano-elastic.io/v1alpha1"
KIND = "ElasticConfig"


class ConfigError(ValueError):
    """The configuration is invalid; ``problems`` lists each one as 'path: what is wrong'."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s):\n{lines}")


_INT_FIELDS_MIN = {
    "cooldownSeconds": 0,
    "minRuntimeSeconds": 0,
    "starvationSeconds": 0,
    "maxEvictionsPerCycle": 0,
    "maxScaleUpPerCycle": 0,
    "maxGateReleasesPerCycle": 1,
    "master": 1,
    "core": 1,
    "elastic": 1,
    "firstRendezvousSeconds": 0,
}
# Keys whose default is null ("not set: derived from another key") but that take an integer >= 0.
_OPTIONAL_INTS = {"scaleUpSnoozeSeconds", "scaleUpAfterCheckpointSeconds", "inPlaceMinWorkersToShrink",
                  "inPlaceCooldownSeconds", "fairnessMinWorkersToShrink"}
# Keys whose default may be null ("not set: the rule as for any job") but that take a number >= 0.
_OPTIONAL_NUMBERS = {"inPlaceMinScaleUpGain"}
POSITIVE = frozenset({"intervalSeconds", "elasticMinShare"})  # numbers that must be > 0
_CHOICES = {"orderBy": ORDER_BY, "admission": ADMISSION}  # string keys with a fixed set of values
_INT_FIELDS_MAX = {
    "noticeSeconds": 86_400,  # a day: a longer notice holds a starving gang's GPUs hostage
    "inPlaceLeaveSeconds": 3_600,  # an hour: the victim's room is promised to its gang meanwhile
    "elasticMinShare": 1,  # a fraction of the queue's deserved share
}


def _check_fields(
    raw: Any, cls: type, path: str, problems: list[str], base: Any = None
) -> dict[str, Any]:
    """Type-check a mapping against a settings dataclass; returns the accepted values."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: must be a mapping, got {type(raw).__name__}")
        return {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        sub = f"{path}.{key}" if path else str(key)
        if key not in fields:
            problems.append(f"{sub}: unknown key (known: {', '.join(sorted(fields))})")
            continue
        default = getattr(cls(), key)  # the type of the key (a queue's base may hold an int for a float)
        if key in _OPTIONAL_INTS:
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                problems.append(f"{sub}: must be an integer >= 0 or null, got {value!r}")
                continue
        elif key in _OPTIONAL_NUMBERS:
            if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)
                                      or not math.isfinite(value) or value < 0):
                problems.append(f"{sub}: must be a number >= 0 or null, got {value!r}")
                continue
            value = None if value is None else float(value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                problems.append(f"{sub}: must be true or false, got {value!r}")
                continue
        elif isinstance(default, int | float) and not isinstance(default, bool):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if isinstance(default, int) and not isinstance(value, int):
                ok = False
            if not ok:
                kind = "an integer" if isinstance(default, int) else "a number"
                problems.append(f"{sub}: must be {kind}, got {value!r}")
                continue
            low = _INT_FIELDS_MIN.get(key, 0)
            if not math.isfinite(value):
                problems.append(f"{sub}: must be a finite number, got {value!r}")
                continue
            positive = key in POSITIVE
            if value < low or (positive and value <= 0):
                problems.append(f"{sub}: must be {'> 0' if positive else f'>= {low}'}, "
                                f"got {value!r}")
                continue
            if isinstance(default, float):
                value = float(value)
            high = _INT_FIELDS_MAX.get(key)
            if high is not None and value > high:
                problems.append(f"{sub}: must be <= {high}, got {value!r}")
                continue
        elif key in _CHOICES:
            if value not in _CHOICES[key]:
                problems.append(f"{sub}: must be one of {', '.join(_CHOICES[key])}, got {value!r}")
                continue
        elif isinstance(default, str):
            if not isinstance(value, str) or not value:
                problems.append(f"{sub}: must be a non-empty string, got {value!r}")
                continue
        out[key] = value
    return out


def parse_config(doc: Any, source: str = "config") -> ElasticConfig:
    """Validate a parsed YAML document; raises ConfigError listing every problem."""
    problems: list[str] = []
    if doc is None:
        return ElasticConfig()
    if not isinstance(doc, Mapping):
        raise ConfigError([f"(root): must be a mapping, got {type(doc).__name__}"], source)
    doc = dict(doc)
    api_version = doc.pop("apiVersion", API_VERSION)
    kind = doc.pop("kind", KIND)
    if api_version != API_VERSION:
        problems.append(f"apiVersion: must be {API_VERSION!r}, got {api_version!r}")
    if kind != KIND:
        problems.append(f"kind: must be {KIND!r}, got {kind!r}")
    nested = {
        "gating": GatingConfig,
        "priorities": PrioritiesConfig,
        "agent": AgentConfig,
        "defaults": QueuePolicy,
        "shares": SharesConfig,
    }
    top = {k: doc.pop(k) for k in list(doc) if k in nested or k in ("queues", "namespaceQueues")}
    values = _check_fields(doc, ElasticConfig, "", problems)
    built: dict[str, Any] = dict(values)
    for name, cls in nested.items():
        built[name] = cls(**_check_fields(top.get(name), cls, name, problems))
    prios = built["priorities"]
    if not prios.master > prios.core > prios.elastic:  # the pod contract: master > core > elastic
        problems.append(f"priorities: must satisfy master > core > elastic, got master={prios.master}, "
                        f"core={prios.core}, elastic={prios.elastic}")
    if built["gating"].gateName and "/" not in built["gating"].gateName:
        problems.append(f"gating.gateName: must be a qualified name like example.io/gate, "
                        f"got {built['gating'].gateName!r}")
    shares = built["shares"]
    if shares.plugin not in SHARE_PLUGINS:
        problems.append(f"shares.plugin: must be one of {', '.join(SHARE_PLUGINS)}, got {shares.plugin!r}")
    elif shares.hierarchy and shares.plugin != "capacity":
        problems.append("shares.hierarchy: hierarchical queues need shares.plugin: capacity "
                        "(Volcano's proportion plugin ignores spec.parent)")
    ns_queues = top.get("namespaceQueues")
    if ns_queues is not None:
        if not isinstance(ns_queues, Mapping):
            problems.append("namespaceQueues: must be a mapping of namespace to queue name")
        else:
            for ns, q in ns_queues.items():
                if not isinstance(ns, str) or not isinstance(q, str) or not q:
                    problems.append(f"namespaceQueues.{ns}: must map a namespace to a queue name, got {q!r}")
            built["namespaceQueues"] = {str(k): str(v) for k, v in ns_queues.items()}
    queues_raw = top.get("queues")
    queues: dict[str, QueuePolicy] = {}
    if queues_raw is not None:
        if not isinstance(queues_raw, Mapping):
            problems.append("queues: must be a mapping of queue name to settings")
        else:
            defaults = built["defaults"]
            for qname, qraw in queues_raw.items():
                fields = _check_fields(qraw, QueuePolicy, f"queues.{qname}", problems, base=defaults)
                queues[str(qname)] = dataclasses.replace(defaults, **fields)
    built["queues"] = queues
    if problems:
        raise ConfigError(problems, source)
    return ElasticConfig(**built)


def load_config(text: str | None, source: str = "config") -> ElasticConfig:
    if text is None:
        return ElasticConfig()
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"(root): not valid YAML: {exc}".replace("\n", " ")], source) from exc
    return parse_config(doc, source)


def load_config_file(path: str | Path | None) -> ElasticConfig:
    """Defaults when ``path`` is None; ConfigError (with every problem) otherwise."""
    if path is None:
        return ElasticConfig()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"(file): cannot read: {exc}"], str(path)) from exc
    return load_config(text, str(path))
