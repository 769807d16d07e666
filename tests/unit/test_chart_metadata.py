"""charts/volcano-elastic/Chart.yaml says who maintains the chart and points nowhere it cannot vouch for:
the project has no public site or repository, so `home`, `sources` and `icon` are left out (a made-up
URL would send admins to whatever someone else registers there), and so is any URL in a maintainer."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "volcano-elastic" / "Chart.yaml"


def test_the_chart_names_its_maintainers_and_no_url_it_cannot_vouch_for() -> None:
    text = CHART.read_text()
    meta = yaml.safe_load(text)
    assert meta["maintainers"] and all(m.get("name") for m in meta["maintainers"])
    assert not {"home", "sources", "icon"} & set(meta), "no public URL exists for these (see Chart.yaml's comment)"
    assert not any("url" in m or "email" in m for m in meta["maintainers"])
    assert not re.search(r"https?://", yaml.safe_dump(meta)), "a URL in the chart's metadata"
    assert "no public repository" in text  # the reason, where the next maintainer looks
