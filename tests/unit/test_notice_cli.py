"""``plan`` and ``status`` on a dump with victims under an eviction notice."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from elastic_controller.cli.status import build_rows, pending_notices, render_notices
from elastic_controller.config import parse_config
from elastic_controller.policy import keys
from tests.harness import builders as b

NOTICE = 120
VICTIMS = ("ns/v-worker-5", "ns/v-worker-4")


def noticed_dump(given_at_seconds_ago: float = 30, gang_placed: bool = False) -> dict[str, Any]:
    """Job v (2..6, all 6 running) with workers 4 and 5 under a notice given ``given_at_seconds_ago``
    for gang g (needs 4 GPUs, starving for 10 min)."""
    doc = b.dump(b.node("n0"), b.queue("default"), b.elastic_job("ns", "v", min_r=2, max_r=6, nodes=["n0"], running=6),
                 b.gang("ns", "g", members=1, gpus=4))
    deadline = b.NOW - timedelta(seconds=given_at_seconds_ago) + timedelta(seconds=NOTICE)
    for obj in doc["items"]:
        meta = obj["metadata"]
        if obj["kind"] == "Pod" and f"ns/{meta['name']}" in VICTIMS:
            meta.setdefault("annotations", {}).update({keys.EVICTED_FOR: "ns/g", keys.EVICT_AFTER: b.ts(deadline)})
        if gang_placed and obj["kind"] == "Pod" and meta["name"] == "g-0":
            obj["spec"]["nodeName"] = "n1"
            obj["status"] = {"phase": "Running"}
    return doc


def plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any], *extra: str) -> str:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(doc))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"defaults:\n  noticeSeconds: {NOTICE}\n")
    code = main(["plan", "--from", str(snap), "--config", str(cfg), "--now", b.ts(b.NOW), *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_plan_shows_a_pending_notice_as_the_gangs_wait(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = json.loads(plan(capsys, tmp_path, noticed_dump(30), "--output", "json"))
    assert doc["evictions"] == []  # no further victims while the notice runs
    (g,) = doc["starving"]
    assert g["podGroup"] == "ns/g" and g["decision"] == "wait"
    assert "under an eviction notice until" in g["reason"] and "90s left" in g["reason"]
    text = plan(capsys, tmp_path, noticed_dump(30))
    assert "NOTICE    ns/v-worker-4" in text and "evicted in 90s" in text


def test_plan_lists_a_due_victim_in_evictions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = json.loads(plan(capsys, tmp_path, noticed_dump(NOTICE + 5), "--output", "json"))
    assert sorted(e["pod"] for e in doc["evictions"]) == sorted(VICTIMS)
    assert all(e["for"] == "ns/g" and e["reason"].startswith("eviction notice: notice ended at")
               for e in doc["evictions"])


def test_plan_shows_a_withdrawal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = noticed_dump(30, gang_placed=True)
    doc["items"].append(b.node("n1"))
    text = plan(capsys, tmp_path, doc)
    assert "WITHDRAW  ns/v-worker-4" in text and "gang ns/g is placed" in text
    assert "EVICT " not in text


def test_status_lists_notices_with_time_left() -> None:
    cfg = parse_config({"defaults": {"noticeSeconds": NOTICE}})
    items = noticed_dump(30)["items"]
    rows = pending_notices(items, cfg, b.NOW)
    assert [(r["pod"], r["for"], r["secondsLeft"]) for r in rows] == [("ns/v-worker-4", "ns/g", 90),
                                                                      ("ns/v-worker-5", "ns/g", 90)]
    assert rows[0]["evictAfter"] == b.ts(b.NOW + timedelta(seconds=90))
    text = render_notices(rows)
    assert text.startswith("EVICTION NOTICES (2 pending") and "90s" in text
    assert pending_notices(items, cfg, b.NOW, namespace="other") == []
    assert render_notices([]) == ""
    due = pending_notices(noticed_dump(NOTICE + 1)["items"], cfg, b.NOW)
    assert [r["secondsLeft"] for r in due] == [0, 0] and "due" in render_notices(due)
    g = next(r for r in build_rows(items, cfg, b.NOW)["default"] if r["job"] == "ns/g")
    assert "under an eviction notice" in g["lastDecision"]
