"""The alerts and the dashboard we ship (charts/volcano-elastic/files, manifests/monitoring):

1. every metric an alert or a dashboard panel names is one the code exports (no typo, no metric
   renamed under them), with the suffixes its type has (``_total``, ``_bucket``, ``_count``);
2. the alerts are the ones docs/operations.md names, and the manifests ship what the chart ships;
3. the chart renders them only when asked (``prometheusRule.enabled``, ``dashboard.enabled``), lints
   with them on, and kustomize renders manifests/monitoring.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from elastic_controller.cli.controller import PrometheusMetrics
from tests.harness.chart import CHART, RELEASE, helm, template
from tests.harness.manifests import NAMESPACE, ROOT, of_kind, render

FILES = CHART / "files"
MONITORING = ROOT / "manifests" / "monitoring"
# Metrics of other components an alert may name (the API server's).
EXTERNAL = {"apiserver_admission_webhook_rejection_count"}


def exported() -> set[str]:
    """Every series name the controller and the webhook export, by metric type."""
    names: set[str] = set()
    registries = [PrometheusMetrics().registry]
    from webhook.metrics import WebhookMetrics

    registries.append(WebhookMetrics().registry)
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    for registry in registries:
        for family in registry.collect():
            names.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return names


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def dashboard() -> dict[str, Any]:
    return dict(json.loads((FILES / "grafana-dashboard.json").read_text()))


def named_metrics(expr: str) -> set[str]:
    """Metric names in a PromQL expression: with label matchers (``{...}``), grouping clauses
    (``by (...)``, ``on (...)``, ...) and strings taken out, an identifier not followed by ``(`` (a
    function) that is not a keyword."""
    bare = re.sub(r'"[^"]*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)
    found = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", bare))
    return found - {"and", "or", "unless", "bool", "offset"}


def dashboard_exprs() -> list[str]:
    out = [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]
    for var in dashboard()["templating"]["list"]:
        if var.get("type") == "query":
            m = re.fullmatch(r"label_values\((\w+), *\w+\)", str(var["definition"]))
            assert m, var["definition"]
            out.append(m.group(1))
    return out


def test_the_expression_parser_finds_metrics_and_only_metrics() -> None:
    assert named_metrics('max by (queue) (volcano_elastic_starving_gangs) > 0') == {"volcano_elastic_starving_gangs"}
    assert named_metrics('sum(increase(x_total{reason="pdb"}[30m])) > 0 and max(y) == 1') == {"x_total", "y"}
    assert named_metrics("histogram_quantile(0.5, sum by (le) (rate(z_bucket[5m])))") == {"z_bucket"}


def test_every_metric_the_alerts_and_the_dashboard_name_is_exported() -> None:
    known = exported() | EXTERNAL
    assert {"volcano_elastic_gated_pods", "volcano_elastic_evictions_total",
            "volcano_elastic_agent_cycle_seconds_count", "volcano_elastic_webhook_requests_total"} <= known
    used: dict[str, set[str]] = {}
    for r in rules():
        used[f"alert {r['alert']}"] = named_metrics(r["expr"])
    for expr in dashboard_exprs():
        used.setdefault("dashboard", set()).update(named_metrics(expr))
    assert all(used.values()), used
    unknown = {where: sorted(m - known) for where, m in used.items() if m - known}
    assert not unknown, f"metrics no code exports: {unknown}"
    state = {"volcano_elastic_gated_pods", "volcano_elastic_scale_up_held_jobs", "volcano_elastic_pods_under_notice",
             "volcano_elastic_queue_elastic_gpus", "volcano_elastic_queue_deserved_gpus"}
    assert state <= used["dashboard"], "the dashboard shows every state gauge"


def test_a_typo_would_be_caught() -> None:
    known = exported()
    assert named_metrics("max(volcano_elastic_starving_gang) > 0") - known == {"volcano_elastic_starving_gang"}


def test_operations_md_names_every_alert_and_every_alert_is_shipped_twice() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    alerts = [r["alert"] for r in rules()]
    assert len(alerts) == len(set(alerts)) >= 5
    assert [a for a in alerts if f"`{a}`" not in doc] == []
    named_in_doc = set(re.findall(r"`(VolcanoElastic\w+)`", doc))
    assert named_in_doc == set(alerts), "docs/operations.md names an alert that is not shipped"
    for r in rules():
        assert r["labels"]["severity"] in ("critical", "warning", "info") and r["annotations"]["summary"]
    shipped = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert shipped["spec"]["groups"] == yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())["groups"]
    assert json.loads((MONITORING / "grafana-dashboard.json").read_text()) == dashboard()


def test_kustomize_renders_the_monitoring_manifests() -> None:
    objs = render("monitoring")
    (rule,) = of_kind(objs, "PrometheusRule")
    (cm,) = of_kind(objs, "ConfigMap")
    assert rule["metadata"]["namespace"] == cm["metadata"]["namespace"] == NAMESPACE
    assert cm["metadata"]["name"] == "volcano-elastic-dashboard"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["volcano-elastic.json"]) == dashboard()


def test_chart_ships_them_only_when_asked() -> None:
    assert not of_kind(template(), "PrometheusRule")
    assert not [o for o in of_kind(template(), "ConfigMap") if o["metadata"]["name"] == "volcano-elastic-dashboard"]
    objs = template("prometheusRule.enabled=true", "prometheusRule.labels.release=prom", "dashboard.enabled=true",
                    "dashboard.namespace=monitoring")
    (rule,) = of_kind(objs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prom" and rule["metadata"]["namespace"] == NAMESPACE
    assert rule["spec"]["groups"] == yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())["groups"]
    assert "{{ $labels.queue }}" in json.dumps(rule["spec"])  # Prometheus's templates, not Helm's
    (cm,) = [o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"] == "volcano-elastic-dashboard"]
    assert cm["metadata"]["namespace"] == "monitoring" and cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["volcano-elastic.json"]) == dashboard()


@pytest.mark.parametrize("sets", [("prometheusRule.enabled=true", "dashboard.enabled=true")])
def test_helm_lint_with_monitoring_on(sets: tuple[str, ...]) -> None:
    args = ["lint", str(CHART), "--strict", "--namespace", NAMESPACE]
    for s in sets:
        args += ["--set", s]
    out = helm(*args)
    assert "0 chart(s) failed" in out.stdout, out.stdout
    assert RELEASE
