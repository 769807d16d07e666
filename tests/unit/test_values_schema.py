"""Issue 40, medium 6: charts/volcano-elastic/values.schema.json makes Helm refuse a value of the wrong
type with its path (``--set config.defaults.minScaleUpGain=0.3`` is the string "0.3": before, both
Deployments crash-looped and PyTorchJob pods were refused cluster-wide). The schema is generated from
the ElasticConfig dataclasses (hack/values_schema.py), so it types every config key as
elastic_controller/config.py does; checked here with a small draft-07 validator (the subset the schema
uses), and with helm itself when the binary cache has it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_controller.config import ConfigError, parse_config
from hack import values_schema

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "volcano-elastic"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())

_TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def errors(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Every violation of ``schema`` (type, const, enum, minimum, maximum, exclusiveMinimum, minLength,
    pattern, properties, additionalProperties, items) as 'path: what'."""
    where = path or "(root)"
    if "const" in schema and value != schema["const"]:
        return [f"{where}: must be {schema['const']!r}"]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{where}: invalid type, expected {'/'.join(kinds)}, given {type(value).__name__}"]
    out = []
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: must be one of {schema['enum']}")
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{where}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{where}: must be <= {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            out.append(f"{where}: must be > {schema['exclusiveMinimum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            out.append(f"{where}: too short")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{where}: does not match {schema['pattern']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k in props:
                out += errors(v, props[k], sub)
            elif extra is False:
                out.append(f"{sub}: additional property not allowed")
            elif isinstance(extra, dict):
                out += errors(v, extra, sub)
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += errors(v, schema["items"], f"{path}[{i}]")
    return out


def with_set(path: str, value: Any) -> dict[str, Any]:
    """values.yaml with ``path`` set to ``value``, as ``--set`` does."""
    values = json.loads(json.dumps(VALUES))
    *parents, last = path.split(".")
    node = values
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value
    return dict(values)


def test_the_file_is_what_the_generator_writes() -> None:
    assert (CHART / "values.schema.json").read_text() == values_schema.render(), \
        "charts/volcano-elastic/values.schema.json is out of date: python -m hack.values_schema"


def test_the_default_values_and_the_shipped_configs_are_valid() -> None:
    assert errors(VALUES, SCHEMA) == []
    config_schema = SCHEMA["properties"]["config"]
    configs = [ROOT / "manifests" / "base" / "config.yaml", *sorted((ROOT / "examples").rglob("*config*.yaml"))]
    for path in configs:
        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict) and doc.get("kind", "ElasticConfig") == "ElasticConfig":
            assert errors(doc, config_schema) == [], path


@pytest.mark.parametrize(("path", "value", "said"), [
    ("config.defaults.minScaleUpGain", "0.3", "config.defaults.minScaleUpGain: invalid type, expected number"),
    ("config.defaults.cooldownSeconds", "600", "config.defaults.cooldownSeconds: invalid type, expected integer"),
    ("config.defaults.cooldownSeconds", 1.5, "config.defaults.cooldownSeconds: invalid type, expected integer"),
    ("config.defaults.cooldownSecond", 60, "config.defaults.cooldownSecond: additional property not allowed"),
    ("config.queues.vision", {"noticeSeconds": 90000}, "config.queues.vision.noticeSeconds: must be <= 86400"),
    ("config.queues.vision", {"preemptDuringCooldown": "yes"},
     "config.queues.vision.preemptDuringCooldown: invalid type, expected boolean"),
    ("config.agent.intervalSeconds", 0, "config.agent.intervalSeconds: must be > 0"),
    ("config.priorities.elastic", 0, "config.priorities.elastic: must be >= 1"),
    ("config.shares.plugin", "drf", "config.shares.plugin: must be one of"),
    ("config.gating.gateName", "scale-up", "config.gating.gateName: does not match /"),
    ("config.namespaceQueues", {"team-a": 3}, "config.namespaceQueues.team-a: invalid type, expected string"),
    ("config.apiVersion", "v1", "config.apiVersion: must be"),
    ("webhook.replicas", "2", "webhook.replicas: invalid type, expected integer"),
    ("certs.mode", 1, "certs.mode: invalid type, expected string"),
    ("controler", {"replicas": 1}, "controler: additional property not allowed"),
], ids=lambda v: v if isinstance(v, str) and "." in v else None)
def test_a_wrong_value_is_refused_with_its_path(path: str, value: Any, said: str) -> None:
    found = errors(with_set(path, value), SCHEMA)
    assert any(e.startswith(said) for e in found), found


@pytest.mark.parametrize(("key", "value"), [
    ("cooldownSeconds", "600"), ("minScaleUpGain", "0.3"), ("scaleUpSnoozeSeconds", -1), ("noticeSeconds", 90000),
    ("preemptDuringCooldown", 1), ("minWorkersToShrink", 2.5), ("firstRendezvousSeconds", -5), ("typo", 1),
])
def test_the_schema_refuses_what_the_controller_refuses(key: str, value: Any) -> None:
    """The same queue setting, given to the controller's own loader and to the schema: both refuse."""
    with pytest.raises(ConfigError):
        parse_config({"defaults": {key: value}})
    assert errors({"defaults": {key: value}}, SCHEMA["properties"]["config"])


@pytest.mark.parametrize(("key", "value"), [
    ("minScaleUpGain", 0.3), ("minScaleUpGain", 2), ("scaleUpSnoozeSeconds", None), ("noticeSeconds", 86400),
])
def test_the_schema_accepts_what_the_controller_accepts(key: str, value: Any) -> None:
    parse_config({"defaults": {key: value}})
    assert errors({"defaults": {key: value}}, SCHEMA["properties"]["config"]) == []


def _cached_helm() -> Path | None:
    """helm from the binary cache or PATH only (this test never builds it)."""
    import shutil

    root = Path(os.environ.get("VOLCANO_ELASTIC_CACHE", Path.home() / ".cache" / "volcano-elastic"))
    found = [p for p in root.glob("*/bin/helm") if os.access(p, os.X_OK)]
    if found:
        return found[0]
    on_path = shutil.which("helm")
    return Path(on_path) if on_path else None


@pytest.mark.parametrize(("flag", "ok"), [
    ("--set=config.defaults.minScaleUpGain=0.3", False),  # the string "0.3"
    ("--set-json=config.defaults.minScaleUpGain=0.3", True),
    ("--set=config.defaults.cooldownSecond=60", False),
])
def test_helm_refuses_a_bad_value_with_its_path(flag: str, ok: bool, tmp_path: Path) -> None:
    helm = _cached_helm()
    if helm is None:
        pytest.skip("no helm in the binary cache or on PATH (bash hack/build-binaries.sh helm)")
    env = {**os.environ, "HELM_CACHE_HOME": str(tmp_path), "HELM_CONFIG_HOME": str(tmp_path),
           "HELM_DATA_HOME": str(tmp_path)}
    proc = subprocess.run([str(helm), "template", "volcano-elastic", str(CHART), "--namespace",
                           "volcano-elastic-system", flag], capture_output=True, text=True, timeout=120, env=env)
    if ok:
        assert proc.returncode == 0, proc.stderr
        assert "minScaleUpGain: 0.3" in proc.stdout
    else:
        key = flag.split("=", 2)[1]
        assert proc.returncode != 0 and "values don't meet the specifications of the schema" in proc.stderr
        assert key.removeprefix("config.defaults.") in proc.stderr and "config" in proc.stderr, proc.stderr
