"""Issue 40, medium 4: the victim's side. In ``status`` the job about to lose workers says so on its own
row (``SHRINKING N for ns/gang`` this cycle, ``NOTICE until TIME`` under an eviction notice) and in JSON
(``victimOf``), not only the gang it makes room for."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.policy.keys import EVICT_AFTER, EVICTED_FOR
from tests.harness.examples import example_items
from tests.harness.statuscli import _a_kubeconfig, rows_of, serve, status  # noqa: F401 (a fixture)

VICTIM = "team-vision/resnet"
GANG = "team-nlp/bert"


def table_row(out: str, job: str) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith(job + " "))


def test_the_job_evicted_for_a_gang_says_so(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    serve(monkeypatch, *example_items("scale-down-for-gang"))
    code, out, _ = status(capsys, "-o", "json")
    rows = rows_of(json.loads(out))
    assert code == 0 and rows[GANG]["victimOf"] is None
    victim = rows[VICTIM]["victimOf"]
    assert (victim["for"], victim["workers"], victim["evicting"], victim["underNotice"], victim["noticeUntil"]) == \
        (GANG, 4, 4, 0, None)
    assert sorted(victim["pods"]) == [f"team-vision/resnet-worker-{i}" for i in (12, 13, 14, 15)]
    _, out, _ = status(capsys)
    assert "SHRINKING 4 for team-nlp/bert" in table_row(out, VICTIM)
    assert "SHRINKING" not in table_row(out, GANG)


def under_notice(items: list[dict[str, Any]], until: str) -> list[dict[str, Any]]:
    items = copy.deepcopy(items)
    for o in items:
        name = o["metadata"]["name"]
        if o["kind"] == "Pod" and name in ("resnet-worker-14", "resnet-worker-15"):
            o["metadata"].setdefault("annotations", {}).update({EVICT_AFTER: until, EVICTED_FOR: GANG})
    return items


def test_a_job_under_an_eviction_notice_says_until_when(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    serve(monkeypatch, *under_notice(example_items("scale-down-for-gang"), "2026-01-01T13:02:00Z"))
    config = tmp_path / "config.yaml"
    config.write_text("defaults: {noticeSeconds: 120}\n")
    code, out, err = status(capsys, "--config", str(config), "-o", "json")
    victim = rows_of(json.loads(out))[VICTIM]["victimOf"]
    assert code == 0, err
    assert (victim["for"], victim["underNotice"], victim["noticeUntil"]) == (GANG, 2, "2026-01-01T13:02:00Z")
    assert victim["evicting"] == 0 and victim["workers"] == 2
    _, out, _ = status(capsys, "--config", str(config), "-o", "wide")
    assert "NOTICE until 2026-01-01T13:02:00Z: 2 for team-nlp/bert" in table_row(out, VICTIM)


def test_an_untouched_job_has_no_victim_entry(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    serve(monkeypatch, *example_items("cooldown-blocks-eviction"))  # the gang waits: nobody loses a worker
    code, out, _ = status(capsys, "-o", "json")
    assert code == 0 and all(r["victimOf"] is None for r in rows_of(json.loads(out)).values())
