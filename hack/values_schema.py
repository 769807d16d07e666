"""charts/volcano-elastic/values.schema.json, generated: Helm checks every install and upgrade against
it, so a value of the wrong type fails ``helm install`` with its path instead of crash-looping both
Deployments (``--set config.defaults.minScaleUpGain=0.3`` is the string "0.3" to ``--set``: use
``--set-json``). The ``config`` part is derived from the ElasticConfig dataclasses and the checks of
elastic_controller/config.py; the rest from values.yaml's own shape.

    python -m hack.values_schema            # rewrite the file
    python -m hack.values_schema --check    # exit 1 when the file is not what this generates

tests/unit/test_values_schema.py fails when the file and this generator disagree.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elastic_controller import config as config_module  # noqa: E402
from elastic_controller.policy import settings  # noqa: E402

CHART = REPO / "charts" / "volcano-elastic"
SCHEMA = CHART / "values.schema.json"
# values.yaml keys whose content is the user's (labels, resources, Kubernetes scheduling fields)
FREE_FORM = {"commonLabels", "commonAnnotations", "resources", "podAnnotations", "podLabels", "nodeSelector",
             "affinity", "labels", "scrapeNamespaceLabels", "requests", "limits"}
FREE_LISTS = {"imagePullSecrets", "tolerations"}


def _field_schema(cls: type, name: str, hint: Any) -> dict[str, Any]:
    default = getattr(cls(), name)
    if name in config_module._OPTIONAL_INTS:
        return {"type": ["integer", "null"], "minimum": 0}
    if name in config_module._OPTIONAL_NUMBERS:
        return {"type": ["number", "null"], "minimum": 0}
    if isinstance(default, bool):
        return {"type": "boolean"}
    if isinstance(default, int | float):
        out: dict[str, Any] = {"type": "integer" if hint is int else "number"}
        if name in config_module.POSITIVE:
            out["exclusiveMinimum"] = 0
        else:
            out["minimum"] = config_module._INT_FIELDS_MIN.get(name, 0)
        if name in config_module._INT_FIELDS_MAX:
            out["maximum"] = config_module._INT_FIELDS_MAX[name]
        return out
    if isinstance(default, str):
        out = {"type": "string", "minLength": 1}
        if cls is settings.SharesConfig and name == "plugin":
            out["enum"] = list(settings.SHARE_PLUGINS)
        if name in config_module._CHOICES:  # orderBy, admission
            out["enum"] = list(config_module._CHOICES[name])
        if cls is settings.GatingConfig and name == "gateName":
            out["pattern"] = "/"
        return out
    raise TypeError(f"{cls.__name__}.{name}: no schema for {type(default).__name__}")


def _dataclass_schema(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {"type": "object", "additionalProperties": False,
            "properties": {f.name: _field_schema(cls, f.name, hints[f.name]) for f in dataclasses.fields(cls)}}


def config_schema() -> dict[str, Any]:
    """The ElasticConfig document, as elastic_controller/config.py accepts it (the cross-key rules,
    like master > core > elastic, stay with the controller)."""
    props: dict[str, Any] = {
        "apiVersion": {"const": config_module.API_VERSION},
        "kind": {"const": config_module.KIND},
    }
    top_hints = typing.get_type_hints(settings.ElasticConfig)
    nested = {"gating": settings.GatingConfig, "priorities": settings.PrioritiesConfig,
              "agent": settings.AgentConfig, "defaults": settings.QueuePolicy, "shares": settings.SharesConfig}
    for f in dataclasses.fields(settings.ElasticConfig):
        if f.name in nested:
            props[f.name] = _dataclass_schema(nested[f.name])
        elif f.name == "namespaceQueues":
            props[f.name] = {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}}
        elif f.name == "queues":
            props[f.name] = {"type": "object", "additionalProperties": _dataclass_schema(settings.QueuePolicy)}
        else:
            props[f.name] = _field_schema(settings.ElasticConfig, f.name, top_hints[f.name])
    return {"type": "object", "additionalProperties": False, "properties": props}


def _shape(key: str, value: Any) -> dict[str, Any]:
    """A values.yaml entry's schema from its default."""
    if key in FREE_FORM:
        return {"type": "object"}
    if key in FREE_LISTS:
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object", "additionalProperties": False,
                "properties": {k: _shape(k, v) for k, v in value.items()}}
    if isinstance(value, list):
        return {"type": "array", "items": {"type": "string"}}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer", "minimum": 0}
    if isinstance(value, str):
        return {"type": "string"}
    raise TypeError(f"values.yaml {key}: no schema for {value!r}")


def schema() -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    props = {k: (config_schema() if k == "config" else _shape(k, v)) for k, v in values.items()}
    props["global"] = {"type": "object"}  # Helm's own, for charts used as subcharts
    # (certs.mode and admission.failurePolicy: the templates' own checks say what is allowed, by name)
    props["image"]["properties"]["pullPolicy"]["enum"] = ["", "Always", "IfNotPresent", "Never"]
    # `--set image.tag=2` and `--set dashboard.labelValue=1` give numbers; the templates quote them
    props["image"]["properties"]["tag"] = {"type": ["string", "number"]}
    props["dashboard"]["properties"]["labelValue"] = {"type": ["string", "number"]}
    props["admission"]["properties"]["timeoutSeconds"] = {"type": "integer", "minimum": 1, "maximum": 30}
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": "volcano-elastic chart values",
            "type": "object", "additionalProperties": False, "properties": props}


def render() -> str:
    return json.dumps(schema(), indent=2) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file differs from what is generated")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not SCHEMA.exists() or SCHEMA.read_text() != text:
            print(f"{SCHEMA.relative_to(REPO)} is out of date: python -m hack.values_schema", file=sys.stderr)
            return 1
        return 0
    SCHEMA.write_text(text)
    print(f"wrote {SCHEMA.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
