"""charts/volcano-elastic with Helm 4 (hack/versions.env HELM4_VERSION, built as bin/helm4), as
tests/integration/test_helm.py does it with Helm 3.

1. ``helm4 lint`` passes, and ``helm4 template`` renders the same objects as Helm 3 (kind, name,
   namespace and content), hooks included; the one difference, Helm 4 dropping the values' nulls
   from the rendered configuration, parses to the same configuration. The values schema refuses a
   string where a number is due with the path, as it does under Helm 3.
2. ``helm4 install --wait`` on a real API server (a box of its own: the chart's cluster-scoped names
   are the ones other tests apply into the shared box), the same values as the Helm 3 install
   (webhook by URL, no Deployments: the box has no kubelet): every object of the release is there,
   the webhook configurations point at the URL; ``helm4 uninstall`` removes them all.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_controller.config import parse_config
from hack.localbox import Box
from tests.harness.helmbox import helm, helm4_command, own_box
from tests.harness.required import cannot_run

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "volcano-elastic"
NAMESPACE = "volcano-elastic-system"
RELEASE = "volcano-elastic"
URL_VALUES = ["--set", "webhook.enabled=false", "--set", "controller.enabled=false", "--set", "certs.mode=external"]


@pytest.fixture(scope="module", autouse=True)
def _helm4() -> None:
    binary, why = helm4_command()
    if binary is None:  # as the Helm 3 test does without helm: `make binaries` builds both
        cannot_run("integration", f"no Helm 4: {why}")


def _objects(text: str) -> dict[tuple[str, str, str], Any]:
    out = {}
    for d in yaml.safe_load_all(text):
        if d:
            out[(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace", ""))] = d
    return out


def _same_text(obj: Any, configs: dict[int, str]) -> Any:
    """``obj`` with the rendered configuration and its checksum put in neutral form."""
    text = json.dumps(obj)
    for rendered in configs.values():
        text = text.replace(json.dumps(rendered)[1:-1], "<config>")
    return re.sub(r'"checksum/config": "[0-9a-f]{64}"', '"checksum/config": "<sha256>"', text)


def _helm(*args: str, major: int, box: Box | None = None) -> subprocess.CompletedProcess[str]:
    return helm(box, *args, timeout=180, required=False, major=major)


def _template(major: int, *values: str) -> subprocess.CompletedProcess[str]:
    return _helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *values, major=major)


def test_helm4_lints_and_renders_what_helm3_renders() -> None:
    lint = _helm("lint", str(CHART), "--strict", major=4)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    by_url = [*URL_VALUES, "--set", "admission.url=https://127.0.0.1:9443", "--set", "admission.caBundle=Y2E="]
    for values in ([], by_url):
        three, four = _template(3, *values), _template(4, *values)
        assert three.returncode == 0, three.stderr
        assert four.returncode == 0, four.stderr
        objs3, objs4 = _objects(three.stdout), _objects(four.stdout)
        assert sorted(objs4) == sorted(objs3)
        configs = {major: objs[("ConfigMap", "volcano-elastic-config", NAMESPACE)]["data"]["config.yaml"]
                   for major, objs in ((3, objs3), (4, objs4))}
        # Helm 4 drops the values' nulls (`scaleUpSnoozeSeconds: null`, which means "= cooldownSeconds")
        # where Helm 3 rendered them: the same configuration, other bytes (and so another checksum).
        assert parse_config(yaml.safe_load(configs[4])) == parse_config(yaml.safe_load(configs[3]))
        for key, obj in objs3.items():  # the chart generates nothing random: the same objects
            assert _same_text(objs4[key], configs) == _same_text(obj, configs), key
    assert len(objs3) >= 10


def test_helm4_applies_the_values_schema_with_the_path() -> None:
    for major in (3, 4):
        bad = _template(major, "--set", "config.defaults.minScaleUpGain=0.3")  # --set makes 0.3 a string
        assert bad.returncode != 0, f"Helm {major} rendered a string where a number is due"
        assert "minScaleUpGain" in bad.stderr, (major, bad.stderr)
        good = _template(major, "--set-json", "config.defaults.minScaleUpGain=0.3")
        assert good.returncode == 0, (major, good.stderr)


def test_the_make_dist_chart_package_renders_with_helm4_as_the_chart_does(tmp_path: Path) -> None:
    """Issue 40: what `make dist` publishes (the chart as a package, ``hack.dist.chart``) installs
    with Helm 4 as well as Helm 3: the same objects as the chart's directory, and the schema inside."""
    from hack import dist

    packaged = dist.chart(tmp_path)
    assert packaged.suffix == ".tgz", packaged
    for major in (3, 4):
        from_package = _helm("template", RELEASE, str(packaged), "--namespace", NAMESPACE, major=major)
        assert from_package.returncode == 0, (major, from_package.stderr)
        assert from_package.stdout == _template(major).stdout, major
        bad = _helm("template", RELEASE, str(packaged), "--set", "config.defaults.minScaleUpGain=0.3", major=major)
        assert bad.returncode != 0 and "minScaleUpGain" in bad.stderr, (major, bad.stderr)


@pytest.fixture(scope="module")
def helm4_box() -> Iterator[Box]:
    yield from own_box("helm4")


def _get(box: Box, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    args = ["get", kind.lower(), name, "--ignore-not-found", "-o", "json"]
    if namespace:
        args += ["-n", namespace]
    out = box.kubectl(*args, check=False).stdout.strip()
    return json.loads(out) if out else None


def test_helm4_installs_and_uninstalls_the_chart(helm4_box: Box) -> None:
    box = helm4_box
    url = "https://127.0.0.1:9443"
    box.kubectl("create", "namespace", NAMESPACE)
    install = _helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--wait", "--timeout", "120s",
                    *URL_VALUES, "--set", f"admission.url={url}", "--set-file", f"admission.caBundle={box.ca_file}",
                    major=4, box=box)
    assert install.returncode == 0, install.stderr
    listed = json.loads(_helm("list", "-n", NAMESPACE, "-o", "json", major=4, box=box).stdout)
    assert [(r["name"], r["status"]) for r in listed] == [(RELEASE, "deployed")]
    manifest = _objects(_helm("get", "manifest", RELEASE, "-n", NAMESPACE, major=4, box=box).stdout)
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} <= {k[0] for k in manifest}
    for kind, name, ns in manifest:
        assert _get(box, kind, name, ns) is not None, f"{kind} {name} not installed"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        ((_, name, _),) = [k for k in manifest if k[0] == kind]
        hooks = (_get(box, kind, name, "") or {})["webhooks"]
        assert hooks and all(h["clientConfig"]["url"].startswith(url) for h in hooks), (kind, hooks)
    config = _get(box, "ConfigMap", "volcano-elastic-config", NAMESPACE)
    assert config is not None and "config.yaml" in config["data"]

    uninstall = _helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--no-hooks", "--wait", major=4, box=box)
    assert uninstall.returncode == 0, uninstall.stderr
    left = [k for k in manifest if (_get(box, *k) or {}).get("metadata", {}).get("deletionTimestamp") is None
            and _get(box, *k) is not None]
    assert left == [], f"left after helm4 uninstall: {left}"
