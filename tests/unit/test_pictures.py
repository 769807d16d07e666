"""The pictures README.md and docs/choosing.md show (docs/img/) are current: each is regenerated
here from what it is drawn from and compared. `make pictures` (python -m hack.pictures) makes a
stale one current again.

- real-training.svg: drawn by the standard library from a recorded run, so compared byte for byte.
- simulate-*.png: matplotlib's pixels change with its releases, so what is compared is what they are
  drawn from (`volcano-elastic simulate --example --policy all`'s summary.json and per-job CSVs, regenerated
  here), the code that draws them (elastic_controller/simulate/plots.py), and that each committed
  PNG is the one pictures.json recorded with those.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hack import pictures

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img"
STALE = "stale: run `make pictures` (python -m hack.pictures) and commit docs/img/"


@pytest.fixture(scope="module")
def manifest() -> dict[str, dict[str, Any]]:
    m = pictures.load_manifest(IMG)
    assert m, f"no {IMG / pictures.MANIFEST}: {STALE}"
    return m


def test_every_picture_in_the_manifest_is_committed_as_recorded(manifest: dict[str, dict[str, Any]]) -> None:
    names = {pictures.TRAINING_SVG, *(f"simulate-{n}" for n in pictures.SIMULATE_PLOTS)}
    assert set(manifest) == names
    for name, entry in manifest.items():
        assert pictures.sha256((IMG / name).read_bytes()) == entry["sha256"], f"docs/img/{name} {STALE}"


def test_the_real_training_chart_is_current(manifest: dict[str, dict[str, Any]]) -> None:
    text = pictures.training_svg()
    assert (IMG / pictures.TRAINING_SVG).read_text() == text, f"docs/img/{pictures.TRAINING_SVG} {STALE}"
    assert manifest[pictures.TRAINING_SVG] == pictures.training_entry(text), f"pictures.json {STALE}"
    assert text.startswith("<svg") and ">workers<" in text and ">loss (log scale)<" in text


def test_the_simulate_pictures_are_drawn_from_todays_simulation(
        manifest: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    pictures.simulate(tmp_path, plots=False)
    data = pictures.simulate_data_sha(tmp_path)
    code = {pictures.SIMULATE_CODE: pictures.file_sha(pictures.SIMULATE_CODE)}
    for n in pictures.SIMULATE_PLOTS:
        entry = manifest[f"simulate-{n}"]
        changed = sorted(k for k in data if entry["data"].get(k) != data[k])
        assert not changed, f"docs/img/simulate-{n}: the simulation's {', '.join(changed)} changed; {STALE}"
        assert entry["code"] == code, f"docs/img/simulate-{n}: {pictures.SIMULATE_CODE} changed; {STALE}"


@pytest.mark.parametrize(("doc", "wanted"), [
    ("README.md", [pictures.TRAINING_SVG, "simulate-allocation.png"]),
    ("docs/choosing.md", [f"simulate-{n}" for n in pictures.SIMULATE_PLOTS]),
])
def test_documents_show_the_pictures_with_the_command_beside_them(doc: str, wanted: list[str]) -> None:
    text = (ROOT / doc).read_text()
    prefix = "docs/img/" if doc == "README.md" else "img/"
    for name in wanted:
        m = re.search(rf"!\[[^\]]+\]\({re.escape(prefix + name)}\)", text)
        assert m, f"{doc} does not embed {prefix}{name}"
        near = text[max(0, m.start() - 600):m.end() + 600]
        assert "make pictures" in near, f"{doc}: no `make pictures` beside {name}"
