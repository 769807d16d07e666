"""hack/build-binaries.sh: the cache lock, the VOLCANO_VERSION override and the cache key.

The script is run for real; only `go` is a stand-in on PATH (a shell script that counts builds,
sleeps and writes the -o file), so these tests need no Go toolchain and take seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from hack.localbox import paths
from tests.harness.fakego import builds, fake_go_env

SCRIPT = paths.BUILD_SCRIPT


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    return fake_go_env(tmp_path)


def test_two_runs_sharing_a_cache_take_turns_and_the_second_reuses(fake_env: dict[str, str]) -> None:
    env = {**fake_env, "FAKE_GO_SLEEP": "3"}
    first = subprocess.Popen(["bash", str(SCRIPT), "etcd"], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lock_owner = Path(env["VOLCANO_ELASTIC_CACHE"]) / paths.cache_key() / ".build.owner"
    deadline = time.monotonic() + 20
    while not lock_owner.exists():  # the first holds the lock before the second starts
        assert time.monotonic() < deadline, "first build never took the lock"
        time.sleep(0.05)
    second = subprocess.run(["bash", str(SCRIPT), "etcd"], env=env, text=True, timeout=60,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out1, _ = first.communicate(timeout=60)
    assert first.returncode == 0, out1
    assert second.returncode == 0, second.stdout
    assert len(builds(env)) == 1, (builds(env), out1, second.stdout)
    assert "another build holds" in second.stdout and "etcd: already built" in second.stdout
    binary = Path(env["VOLCANO_ELASTIC_CACHE"]) / paths.cache_key() / "bin" / "etcd"
    assert os.access(binary, os.X_OK)
    assert not list(binary.parent.glob(".etcd.tmp*"))


def test_a_killed_build_leaves_no_lock_behind(fake_env: dict[str, str]) -> None:
    env = {**fake_env, "FAKE_GO_SLEEP": "30"}
    first = subprocess.Popen(["bash", str(SCRIPT), "etcd"], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not builds(env):
        assert time.monotonic() < deadline, "first build never started"
        time.sleep(0.05)
    os.killpg(first.pid, 9)
    first.wait(timeout=10)
    env["FAKE_GO_SLEEP"] = "0"
    second = subprocess.run(["bash", str(SCRIPT), "etcd"], env=env, text=True, timeout=30,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert second.returncode == 0, second.stdout
    assert "another build holds" not in second.stdout
    assert len(builds(env)) == 2


def test_volcano_version_override_selects_its_own_key(fake_env: dict[str, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    default_key = paths.cache_key()
    env = {**fake_env, "VOLCANO_VERSION": "v1.14.1"}
    r = subprocess.run(["bash", str(SCRIPT), "etcd"], env=env, text=True, timeout=30,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert r.returncode == 0, r.stdout
    monkeypatch.setenv("VOLCANO_VERSION", "v1.14.1")
    key = paths.cache_key()
    assert key != default_key
    assert f"/{key} " in r.stdout  # the script and hack/localbox agree on the key
    assert paths.versions()["VOLCANO_VERSION"] == "v1.14.1"
    written = (Path(env["VOLCANO_ELASTIC_CACHE"]) / key / "versions.env").read_text()
    assert "VOLCANO_VERSION=v1.14.1\n" in written


def test_default_key_matches_hack_localbox(fake_env: dict[str, str]) -> None:
    r = subprocess.run(["bash", str(SCRIPT), "etcd"], env=fake_env, text=True, timeout=30,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert r.returncode == 0, r.stdout
    assert f"/{paths.cache_key()} " in r.stdout


@pytest.mark.parametrize("version", ["v1.13.0", "1.15.1", "v1.15.1; rm -rf /"])
def test_unsupported_volcano_version_is_refused_with_the_supported_ones(fake_env: dict[str, str],
                                                                        version: str) -> None:
    env = {**fake_env, "VOLCANO_VERSION": version}
    r = subprocess.run(["bash", str(SCRIPT), "etcd"], env=env, text=True, timeout=30,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert r.returncode == 2, r.stdout
    assert version in r.stdout
    if version == "v1.13.0":
        assert "supported: v1.14.1 v1.15.1" in r.stdout
    assert not builds(env)


def test_every_supported_volcano_has_a_wrapper_pinning_it() -> None:
    versions = paths.supported_volcano_versions()
    assert paths.versions()["VOLCANO_VERSION"] in versions
    assert "v1.14.1" in versions  # the oldest supported, documented in versions.env
    for v in versions:
        gomod = (paths.HACK_DIR / "gomod" / f"volcano-{v}" / "go.mod").read_text()
        assert re.search(rf"^\s*(require\s+)?volcano\.sh/volcano\s+{re.escape(v)}(\s|$)", gomod, re.M), v
        assert (paths.HACK_DIR / "gomod" / f"volcano-{v}" / "go.sum").exists()
