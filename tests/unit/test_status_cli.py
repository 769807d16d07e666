"""``volcano-elastic status`` against an in-memory API server holding the bundled plan examples:
the snapshot is always the whole cluster (``-n`` filters rows), output formats, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from elastic_controller.kube import client as kube_client
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import SNAPSHOT_RESOURCES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plan"
NOW = "2026-01-01T13:00:00Z"  # the time the bundled examples are planned at
KINDS = {r.kind: r for r in SNAPSHOT_RESOURCES}


def serve(monkeypatch: pytest.MonkeyPatch, *items: dict[str, Any]) -> FakeKube:
    """``items`` served as an API: every command's ``KubeClient.from_kubeconfig`` gets this server."""
    kube = FakeKube()
    for obj in items:
        kube.add(KINDS[obj["kind"]], obj)
    monkeypatch.setattr(kube_client.KubeClient, "from_kubeconfig",
                        classmethod(lambda cls, *a, **kw: kube))
    return kube


def example(name: str) -> list[dict[str, Any]]:
    return list(json.loads((EXAMPLES / f"{name}.json").read_text())["items"])


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", "--now", NOW, "--volcano-scheduler-configmap", "", *args])
    out, err = capsys.readouterr()
    return code, out, err


def rows_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["job"]: r for key, rows in doc.items() if key not in ("evictionNotices", "skippedObjects")
            for r in rows}


@pytest.mark.parametrize(("name", "gang", "decision"), [
    ("scale-down-for-gang", "team-nlp/bert", "evict"),
    ("cooldown-blocks-eviction", "team-nlp/bert", "wait"),
])
def test_namespace_filters_rows_and_never_changes_a_decision(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], name: str,
                                                             gang: str, decision: str) -> None:
    serve(monkeypatch, *example(name))
    expected = json.loads((EXAMPLES / f"{name}.expected.json").read_text())
    (want,) = [s for s in expected["starving"] if s["podGroup"] == gang]
    assert want["decision"] == decision  # the example's reviewed story
    code, out, err = status(capsys, "--output", "json")
    assert code == 0, err
    everywhere = rows_of(json.loads(out))
    code, out, err = status(capsys, "--output", "json", "-n", gang.split("/")[0])
    assert code == 0, err
    scoped = rows_of(json.loads(out))
    assert set(scoped) == {gang} and "team-vision/resnet" in everywhere
    assert scoped[gang] == everywhere[gang]
    assert scoped[gang]["lastDecision"].startswith(f"now: {decision}: "), scoped[gang]
    assert scoped[gang]["lastDecision"] == f"now: {want['decision']}: {want['reason']}"
