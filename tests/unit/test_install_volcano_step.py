"""Issue 40, medium 6: docs/install.md's Volcano step merges our required actions into the cluster's
scheduler configuration instead of overwriting it, shows the change as a diff first, and names the
Volcano chart's override value (else Volcano's next `helm upgrade` brings preempt/reclaim back). The
documented `sed` is run here on every scheduler configuration the repository ships."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from elastic_controller.volcanoconf import parse_scheduler_actions

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "install.md").read_text()
CONFS = sorted([*(ROOT / "hack").glob("volcano-scheduler-*.conf"), ROOT / "manifests/examples/volcano-scheduler.conf"])


def documented_sed() -> list[str]:
    m = re.search(r"^\s*sed -E '([^']+)' \\\n\s*volcano-scheduler\.current\.conf > volcano-scheduler\.merged\.conf",
                  DOC, re.MULTILINE)
    assert m, "docs/install.md: the sed that merges the actions line is gone"
    return ["sed", "-E", m.group(1)]


def test_the_step_merges_instead_of_overwriting() -> None:
    assert "--from-file=volcano-scheduler.conf=manifests/examples/volcano-scheduler.conf" not in DOC
    assert "diff -u volcano-scheduler.current.conf volcano-scheduler.merged.conf" in DOC
    assert "--set-file custom.scheduler_config_override=volcano-scheduler.merged.conf" in DOC


@pytest.mark.skipif(shutil.which("sed") is None, reason="no sed")
@pytest.mark.parametrize("conf", CONFS, ids=lambda p: p.name)
def test_the_documented_merge_keeps_everything_but_the_evicting_actions(conf: Path) -> None:
    before = conf.read_text()
    after = subprocess.run(documented_sed(), input=before, capture_output=True, text=True, check=True).stdout
    assert parse_scheduler_actions(after).actions == ("enqueue", "allocate", "backfill")
    assert parse_scheduler_actions(after).evicting == ()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert all(a.startswith("actions:") for a, _ in changed), changed  # tiers and plugin arguments untouched
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    assert {k: v for k, v in old.items() if k != "actions"} == {k: v for k, v in new.items() if k != "actions"}
