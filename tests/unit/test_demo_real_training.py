"""hack/demo.py's real-training part: when it runs the real-node job, and what it draws when it cannot."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hack import demo

RECORDED = json.loads(demo.RECORDED.read_text())


def never(_: Path) -> tuple[int, str]:
    raise AssertionError("the real-node run must not start here")


def writes(doc: dict[str, object] | None, rc: int, tail: str = "") -> demo.Runner:
    def runner(out: Path) -> tuple[int, str]:
        assert not out.exists(), "an earlier run's result was left in place"
        if doc is not None:
            out.write_text(json.dumps(doc))
        return rc, tail
    return runner


def flat(out: str) -> str:
    """The output with the loud frame's prefixes and the wrapping taken out."""
    return " ".join(" ".join(line.removeprefix("!!  ") for line in out.splitlines()).split())


def svg_texts(path: Path) -> str:
    return " ".join(t.text or "" for t in ET.parse(path).iter("{http://www.w3.org/2000/svg}text"))


@pytest.mark.parametrize(("problems", "boxes", "real_boxes", "keep", "expect"), [
    ([], [], [], False, []),
    (["not root"], [], [], False, ["this host cannot run real nodes: not root"]),
    ([], [], [], True, ["--keep leaves the demo's box running"]),
    ([], ["demo"], [], False, ["the demo's box 'demo' is still running"]),
    ([], ["other"], [], False, []),  # another kwok box is not ours to stop
    ([], ["lead"], ["lead"], False, ["box 'lead' already has real nodes"]),
    (["no overlay"], ["demo"], ["lead"], False, ["this host cannot", "the demo's box", "box 'lead'"]),
], ids=["free", "host", "keep", "demo-box-up", "other-kwok-box", "real-box-up", "all"])
def test_blockers(problems: list[str], boxes: list[str], real_boxes: list[str], keep: bool,
                  expect: list[str]) -> None:
    got = demo.real_training_blockers(problems, boxes, real_boxes, keep)
    assert len(got) == len(expect)
    for reason, start in zip(got, expect, strict=True):
        assert reason.startswith(start), reason


def test_a_host_without_real_nodes_shows_the_recorded_run_loudly(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ok = demo.real_training("auto", tmp_path, keep=False, problems=["cgroups are not writable"], boxes=[],
                            real_boxes=[], runner=never, width=100)
    out = flat(capsys.readouterr().out)
    assert not ok
    assert "NO REAL TRAINING RUN HERE: this host cannot run real nodes: cgroups are not writable" in out
    assert "RECORDED RUN, not this machine's: bench/results/real_training-kit.json" in out
    assert "shrink 4 -> 2 workers" in out and "grow 2 -> 4 workers" in out
    assert "RECORDED RUN" in svg_texts(tmp_path / "real-training.svg")
    assert not (tmp_path / "real_training.json").exists()


def test_a_live_run_is_drawn_as_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok = demo.real_training("on", tmp_path, keep=False, problems=[], boxes=[], real_boxes=[],
                            runner=writes(RECORDED, 0), width=100)
    out = flat(capsys.readouterr().out)
    assert ok
    assert "!!!" not in out and "RECORDED" not in out
    when = RECORDED.get("date") or "2026-11-27 01:12 UTC"  # the file's own date, else its log's clock
    assert f"LIVE RUN on this machine, {when}" in out and f"result in {tmp_path / 'real_training.json'}" in out
    assert "LIVE RUN" in svg_texts(tmp_path / "real-training.svg")


def test_a_live_run_that_failed_is_drawn_and_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = {**RECORDED, "succeeded": False, "state": "Failed", "stepsDone": 213}
    ok = demo.real_training("auto", tmp_path, keep=False, problems=[], boxes=[], real_boxes=[],
                            runner=writes(failed, 1), width=100)
    out = flat(capsys.readouterr().out)
    assert not ok
    assert "THE REAL TRAINING RUN DID NOT MEET ITS TARGETS (bench/real_training.py exit code 1): " \
           f"Failed: 213 of {RECORDED['stepsTarget']} steps" in out
    assert "LIVE RUN" in out and "RECORDED" not in out


def test_a_run_that_broke_before_its_result_shows_why_and_the_recorded_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "real_training.json").write_text(json.dumps(RECORDED))  # an earlier run's: never drawn as this one
    ok = demo.real_training("auto", tmp_path, keep=False, problems=[], boxes=[], real_boxes=[],
                            runner=writes(None, 1, "helm install failed: timed out"), width=100)
    out = flat(capsys.readouterr().out)
    assert not ok
    assert "NO REAL TRAINING RUN HERE: bench/real_training.py ended with exit code 1 and no result" in out
    assert "helm install failed: timed out" in out
    assert "RECORDED RUN, not this machine's" in out


def test_off_does_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.real_training("off", tmp_path / "x", keep=False, runner=never)
    assert capsys.readouterr().out == ""
    assert not (tmp_path / "x").exists()


def test_on_with_keep_is_refused_before_anything_starts(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["demo", "--real-training", "on", "--keep"])
    monkeypatch.setattr(demo, "live", lambda keep: pytest.fail("the live part started"))
    with pytest.raises(SystemExit) as e:
        demo.main()
    assert e.value.code == 2
    assert "--real-training on needs the demo's box down" in capsys.readouterr().err
