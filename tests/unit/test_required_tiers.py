"""A cluster tier that cannot run fails in CI and as root with the node packages installed, and
skips elsewhere, named in the summary line (tests/harness/required.py, tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.required import Host, host_of, required_because, summary, verdict

ROOT = Path(__file__).resolve().parents[2]
PACKAGES_MISSING = ("containerd", "CNI plugin bridge")


@pytest.mark.parametrize(("environ", "euid", "missing", "expected"), [
    pytest.param({"CI": "true"}, 1000, PACKAGES_MISSING, Host(True, False, PACKAGES_MISSING), id="ci-true"),
    pytest.param({"CI": "1"}, 0, (), Host(True, True, ()), id="ci-1-root"),
    pytest.param({"CI": "false"}, 1000, (), Host(False, False, ()), id="ci-false"),
    pytest.param({"CI": " No "}, 1000, (), Host(False, False, ()), id="ci-no"),
    pytest.param({"CI": ""}, 0, (), Host(False, True, ()), id="ci-empty"),
    pytest.param({}, 0, PACKAGES_MISSING, Host(False, True, PACKAGES_MISSING), id="no-ci"),
])
def test_host_of(environ: dict[str, str], euid: int, missing: tuple[str, ...], expected: Host) -> None:
    assert host_of(environ, euid, missing) == expected


@pytest.mark.parametrize(("host", "because"), [
    pytest.param(Host(ci=True, root=False, missing_node_packages=PACKAGES_MISSING), "CI is set", id="ci-no-root"),
    pytest.param(Host(ci=True, root=True, missing_node_packages=()), "CI is set", id="ci-root"),
    pytest.param(Host(ci=False, root=True, missing_node_packages=()),
                 "running as root with the node packages installed", id="root-with-packages"),
    pytest.param(Host(ci=False, root=True, missing_node_packages=PACKAGES_MISSING), None, id="root-no-packages"),
    pytest.param(Host(ci=False, root=False, missing_node_packages=()), None, id="developer-no-root"),
])
def test_required_because(host: Host, because: str | None) -> None:
    assert required_because(host) == because


def test_a_required_tier_fails_with_the_reason() -> None:
    v = verdict("real", "an image could not be built: pip failed", Host(ci=False, root=True, missing_node_packages=()))
    assert v.fail
    assert v.message == ("the real tier is required here (running as root with the node packages installed) "
                         "and cannot run: an image could not be built: pip failed")


@pytest.mark.parametrize(("host", "why"), [
    pytest.param(Host(ci=False, root=False, missing_node_packages=()), "not root", id="no-root"),
    pytest.param(Host(ci=False, root=True, missing_node_packages=PACKAGES_MISSING),
                 "node packages missing: containerd, CNI plugin bridge", id="no-packages"),
])
def test_a_tier_not_required_skips_saying_why(host: Host, why: str) -> None:
    v = verdict("e2e", "control plane box not started: no etcd", host)
    assert not v.fail
    assert v.message == f"SKIPPING the e2e tier ({why}, not CI): control plane box not started: no etcd"


def test_summary_names_each_skipped_tier() -> None:
    assert summary({}) == ([], None)
    assert summary({"real": "not root"}) == (["real: not root"], "tier skipped, not required here: real")
    lines, words = summary({"real": "not root", "e2e": "no etcd"})
    assert lines == ["e2e: no etcd", "real: not root"]
    assert words == "tiers skipped, not required here: e2e, real"


CANNOT_RUN = """
from tests.harness import required

required.this_host = lambda: required.Host({host})  # the host this run pretends to be

def test_a(request):
    required.cannot_run("real", "no kubelet here", request.config)

def test_b():
    pass
"""


@pytest.mark.parametrize(("host", "outcome"), [
    pytest.param("ci=True, root=False, missing_node_packages=()", "1 failed, 1 passed", id="ci"),
    pytest.param("ci=False, root=True, missing_node_packages=()", "1 failed, 1 passed", id="root-with-packages"),
    pytest.param("ci=False, root=False, missing_node_packages=()", "1 passed, 1 skipped", id="developer"),
])
def test_the_summary_line_of_a_run(tmp_path: Path, host: str, outcome: str) -> None:
    """A whole pytest run with tests/conftest.py's summary hook: where the tiers are required the test
    fails with the reason; elsewhere it skips and the summary line names the tier."""
    (tmp_path / "test_probe.py").write_text(CANNOT_RUN.format(host=host))
    pythonpath = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                          "-p", "tests.conftest", "test_probe.py"], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120, env={**os.environ, "PYTHONPATH": pythonpath})
    last = run.stdout.strip().splitlines()[-1]
    assert outcome in last, run.stdout[-3000:]
    if "failed" in outcome:
        assert "the real tier is required here" in run.stdout and "cannot run: no kubelet here" in run.stdout
        assert "not required here" not in last
    else:
        assert "1 tier skipped, not required here: real" in last
        assert "real: no kubelet here" in run.stdout

