"""hack/build-binaries.sh builds Helm 4 as bin/helm4 beside Helm 3, without changing the cache key.

The script is run for real with a stand-in `go` on PATH (it writes a helm4 that prints the version
it was stamped with), so no Go toolchain is needed.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from hack.localbox import paths
from tests.harness.fakego import builds, fake_go_env


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    return fake_go_env(tmp_path)


def _run(env: dict[str, str], *names: str) -> str:
    r = subprocess.run(["bash", str(paths.BUILD_SCRIPT), *names], env=env, text=True, timeout=60,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert r.returncode == 0, r.stdout
    return r.stdout


def test_helm4_is_pinned_wrapped_and_outside_the_key() -> None:
    versions = paths.versions()
    assert re.fullmatch(r"v4\.\d+\.\d+", versions["HELM4_VERSION"])
    assert paths.BINARIES["helm4"] == ("helm.sh/helm/v4", "HELM4_VERSION")
    gomod = (paths.HACK_DIR / "gomod" / "helm4" / "go.mod").read_text()
    assert re.search(rf"^\s*helm\.sh/helm/v4\s+{re.escape(versions['HELM4_VERSION'])}(\s|$)", gomod, re.M)
    assert "tool helm.sh/helm/v4/cmd/helm" in gomod and (paths.HACK_DIR / "gomod" / "helm4" / "go.sum").exists()
    keyed = [ln for ln in paths.version_lines() if not ln.startswith("HELM4_VERSION=")]
    assert paths.cache_key() == "v-" + hashlib.sha256("".join(ln + "\n" for ln in keyed).encode()).hexdigest()[:12]


def test_helm4_is_built_once_and_rebuilt_when_its_pin_moves(fake_env: dict[str, str]) -> None:
    pin = paths.versions()["HELM4_VERSION"]
    out = _run(fake_env, "helm4")
    assert f"/{paths.cache_key()} " in out  # the script and hack/localbox agree on the key
    binary = Path(fake_env["VOLCANO_ELASTIC_CACHE"]) / paths.cache_key() / "bin" / "helm4"
    assert subprocess.run([str(binary), "version"], capture_output=True, text=True).stdout.strip() == pin
    assert "helm4: already built" in _run(fake_env, "helm4")
    binary.write_text("#!/bin/sh\necho v4.0.0\n")  # a helm4 of an older pin, in the same key
    out = _run(fake_env, "helm4")
    assert f"helm4: {binary} is not helm.sh/helm/v4@{pin}: rebuilding" in out
    done = builds(fake_env)
    assert len(done) == 2 and all(".helm4.tmp." in b for b in done)
