"""Issue 40, high 2: the first ``make demo`` on a fresh root machine runs the real training job (it
depends on what makes that job runnable, as ``make test`` does), says at once whether its training part
will be live or recorded and why, and ``make help`` says what the demo does. The demo itself is not run
here (minutes, root); its decision is."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hack import demo

ROOT = Path(__file__).resolve().parents[2]
RECORDED_DOC = demo.RECORDED.read_text()


def prerequisites(target: str) -> set[str]:
    text = (ROOT / "Makefile").read_text()
    m = re.search(rf"^{re.escape(target)}:([^#\n]*)", text, re.MULTILINE)
    assert m, f"no target {target}"
    return set(m.group(1).split())


def test_demo_builds_what_the_real_training_job_needs() -> None:
    """bench/real_training.py needs what `make test-real` builds first: the venv, the binaries (kubelet,
    kube-scheduler, coredns among them) and the node packages (containerd, runc, CNI plugins)."""
    assert prerequisites("test-real") <= prerequisites("demo"), prerequisites("demo")
    assert "node-packages" in prerequisites("test")  # ... as `make test` does


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("column") is None, reason="no make/column")
def test_make_help_says_what_the_demo_does() -> None:
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    line = next(line for line in out.splitlines() if line.startswith("demo "))
    for words in ("elastic scaling live", "plan", "simulate", "real torchrun job on real nodes", "RECORDED"):
        assert words in line, line


@pytest.mark.parametrize(("mode", "why", "starts", "has"), [
    ("auto", [], "real training: LIVE, on this machine's real nodes", []),
    ("on", [], "real training: LIVE", []),
    ("off", ["not root (a kubelet and containerd need root)"], "real training: OFF", []),
    ("auto", ["not root (a kubelet and containerd need root)"], "real training: RECORDED, not live, because not root",
     []),
    ("auto", ["missing containerd, runc (install them with: sudo bash hack/install-node-packages.sh)"],
     "real training: RECORDED, not live, because missing containerd, runc",
     ["`make node-packages` installs them as root"]),
], ids=["free", "on", "off", "not-root", "no-packages"])
def test_the_verdict_says_live_or_recorded_and_why(mode: str, why: list[str], starts: str, has: list[str]) -> None:
    verdict = demo.training_verdict(mode, why)
    assert verdict.startswith(starts), verdict
    for words in has:
        assert words in verdict, verdict
    assert ("make node-packages" in verdict) == bool(has)


def test_the_blockers_of_a_fresh_root_machine_after_make_demos_prerequisites_are_none() -> None:
    """What decides: with nothing missing on the host (the prerequisites installed) and no other box,
    the verdict is live; each blocker the host reports turns it into recorded, named."""
    assert demo.training_verdict("auto", demo.real_training_blockers([], [], [], False)).startswith(
        "real training: LIVE")
    blocked = demo.training_verdict("auto", demo.real_training_blockers([], [], ["lead"], False))
    assert blocked.startswith("real training: RECORDED, not live, because box 'lead' already has real nodes")


def test_the_end_of_the_part_says_recorded_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def never(_: Path) -> tuple[int, str]:
        raise AssertionError("no live run where the host cannot")

    assert not demo.real_training("auto", tmp_path, keep=False, problems=["not root (a kubelet needs root)"],
                                  boxes=[], real_boxes=[], runner=never, width=100)
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.endswith("real training: RECORDED, not live, because this host cannot run real nodes: not root "
                         "(a kubelet needs root)"), last


def test_the_end_of_a_live_part_says_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def runner(out: Path) -> tuple[int, str]:
        out.write_text(RECORDED_DOC)
        return 0, ""

    assert demo.real_training("auto", tmp_path, keep=False, problems=[], boxes=[], real_boxes=[], runner=runner,
                              width=100)
    assert capsys.readouterr().out.rstrip().splitlines()[-1].endswith("real training: LIVE, this machine's run")
