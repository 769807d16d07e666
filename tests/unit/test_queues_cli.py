"""``volcano-elastic queues``: each queue's share, usage and effective policy, from a dump or a cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_controller.cli import main
from elastic_controller.kube import client as kube_client
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import SNAPSHOT_RESOURCES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plan"
NOW = "2026-01-01T13:00:00Z"


def queues(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["queues", "--now", NOW, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_department_tree_shows_the_capacity_models_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled department tree: research may hold 24 GPUs (capability) and scratch's sweep fills
    them; vision (in research) deserves 8 and runs nothing."""
    code, out, err = queues(capsys, "--from", str(EXAMPLES / "department-tree.json"), "--config",
                            str(EXAMPLES / "department-tree.config.yaml"), "-o", "json")
    doc = json.loads(out)
    assert code == 0 and err == ""
    assert (doc["apiVersion"], doc["kind"], doc["sharesPlugin"], doc["resource"]) == (
        "volcano-elastic.io/v1", "QueueList", "capacity (hierarchical)", "nvidia.com/gpu")
    by = {q["name"]: q for q in doc["queues"]}
    assert list(by) == ["research", "scratch", "vision"]
    assert (by["research"]["capability"], by["research"]["allocated"], by["research"]["parent"]) == (24, 24, "root")
    assert (by["scratch"]["allocated"], by["scratch"]["parent"], by["scratch"]["elasticJobs"]) == (24, "research", 1)
    assert (by["vision"]["deserved"], by["vision"]["allocated"]) == (8, 0)
    code, out, _ = queues(capsys, "--from", str(EXAMPLES / "department-tree.json"), "--config",
                          str(EXAMPLES / "department-tree.config.yaml"))
    lines = out.splitlines()
    assert lines[0] == "SHARES capacity (hierarchical), in GPUs"
    assert lines[1].split()[:4] == ["QUEUE", "PARENT", "WEIGHT", "DESERVED"]
    assert lines[2].split()[:7] == ["research", "root", "1", "-", "24", "24", "0/0"]


def test_a_queues_own_policy_is_shown_beside_the_defaults(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("defaults: {cooldownSeconds: 120}\nqueues:\n  vision: {cooldownSeconds: 900, noticeSeconds: 60, "
                   "minScaleUpGain: 0.3, starvationSeconds: 45}\n")
    code, out, _ = queues(capsys, "--from", str(EXAMPLES / "scale-down-for-gang.json"), "--config", str(cfg))
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert code == 0
    assert rows["vision"][7:] == ["900s", "45s", "60s", "0.3", "4", "16/4", "queues.vision"]
    assert rows["nlp"][7:] == ["120s", "30s", "60s", "1", "4", "16/4", "defaults"]  # the default notice
    assert (rows["vision"][3], rows["vision"][4], rows["nlp"][3], rows["nlp"][4]) == ("24", "32", "8", "0")
    code, out, _ = queues(capsys, "--from", str(EXAMPLES / "scale-down-for-gang.json"), "--config", str(cfg),
                          "-o", "yaml")
    vision = next(q for q in yaml.safe_load(out)["queues"] if q["name"] == "vision")
    assert vision["policy"]["noticeSeconds"] == 60 and vision["policy"]["scaleUpSnoozeSeconds"] is None
    code, out, _ = queues(capsys, "--from", str(EXAMPLES / "scale-down-for-gang.json"), "--config", str(cfg),
                          "-o", "wide")
    header, *rest = out.splitlines()[1:]
    assert header.split("  ")[-1].strip() == "RECLAIMABLE" and "PREEMPT IN COOLDOWN" in header
    assert rest[1].split()[-6:] == ["120s", "900s", "30s", "600s", "no", "yes"]


def test_a_config_queue_that_does_not_exist_is_warned_about(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("queues: {visoin: {cooldownSeconds: 60}}\n")
    code, _, err = queues(capsys, "--from", str(EXAMPLES / "scale-down-for-gang.json"), "--config", str(cfg))
    assert code == 0 and err == ("volcano-elastic queues: warning: the config's queues visoin match no Queue in the "
                                 "dump (queues: nlp, vision): their policy applies to nothing; a typo?\n")


def test_reads_the_cluster_when_no_dump_is_given(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    kinds = {r.kind: r for r in SNAPSHOT_RESOURCES}
    kube = FakeKube()
    for obj in json.loads((EXAMPLES / "scale-down-for-gang.json").read_text())["items"]:
        kube.add(kinds[obj["kind"]], obj)
    seen: list[Any] = []

    def from_kubeconfig(cls: Any, path: Any = None, settings: Any = None, context: Any = None) -> FakeKube:
        seen.append(context)
        return kube

    monkeypatch.setattr(kube_client.KubeClient, "from_kubeconfig", classmethod(from_kubeconfig))
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\ncontexts: [{name: lab}]\n")
    code, out, _ = queues(capsys, "--kubeconfig", str(config), "--context", "lab", "-o", "json")
    offline = json.loads(queues(capsys, "--from", str(EXAMPLES / "scale-down-for-gang.json"), "-o", "json")[1])
    assert code == 0 and seen == ["lab"] and json.loads(out)["queues"] == offline["queues"]
