"""The read-only commands (status, queues, release-gates) run against the in-memory API server: a
bundled example cluster served, the command run, its rows read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from elastic_controller.kube import client as kube_client
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import SNAPSHOT_RESOURCES
from tests.harness.examples import PLANNED_AT

KINDS = {r.kind: r for r in SNAPSHOT_RESOURCES}


@pytest.fixture(autouse=True)
def _a_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A kubeconfig file that exists (``serve`` replaces the client it would make)."""
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("KUBECONFIG", str(path))


def serve(monkeypatch: pytest.MonkeyPatch, *items: dict[str, Any]) -> FakeKube:
    """``items`` served as an API: every command's ``KubeClient.from_kubeconfig`` gets this server."""
    kube = FakeKube()
    for obj in items:
        kube.add(KINDS[obj["kind"]], obj)
    monkeypatch.setattr(kube_client.KubeClient, "from_kubeconfig",
                        classmethod(lambda cls, *a, **kw: kube))
    return kube


def status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["status", "--now", PLANNED_AT, "--volcano-scheduler-configmap", "", *args])
    out, err = capsys.readouterr()
    return code, out, err


def rows_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["job"]: r for rows in doc["queues"].values() for r in rows}
