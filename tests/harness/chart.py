"""The Helm chart (charts/volcano-elastic): the helm binary (from the cache, PATH, or built), and the
chart rendered with --set values."""

from __future__ import annotations

import copy
import fcntl
import os
import shutil
import subprocess
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import manifests
from tests.harness.manifests import NAMESPACE, ROOT, build_tool
from tests.harness.required import cannot_run

CHART = ROOT / "charts" / "volcano-elastic"
RELEASE = "volcano-elastic"
HOOK = "helm.sh/hook"


# ---------------------------------------------------------------------- helm
def _locate_helm(why: list[str]) -> Path | None:
    try:
        from hack.localbox import paths

        own = paths.binary("helm")
        if os.access(own, os.X_OK):
            return own
        why.append(f"no {own} (bash hack/build-binaries.sh helm)")
    except Exception as exc:  # hack/ broken: fall back to PATH and a build of our own
        why.append(f"hack.localbox unusable: {exc}")
    found = sorted(manifests._cache_root().glob("*/bin/helm"), key=lambda p: p.stat().st_mtime, reverse=True)
    found = [p for p in found if os.access(p, os.X_OK)]
    if found:
        return found[0]
    path = shutil.which("helm")
    if path:
        return Path(path)
    why.append("no helm on PATH")
    return None


def _build_helm(why: list[str]) -> Path | None:
    """``bash hack/build-binaries.sh helm`` (stamped like upstream's release builds), one at a time."""
    if shutil.which("go") is None:
        why.append("no `go` on PATH to build helm")
        return None
    try:
        from hack.localbox import paths
    except Exception as exc:
        why.append(f"cannot build helm: {exc}")
        return None
    binary = paths.binary("helm")
    paths.build_dir().mkdir(parents=True, exist_ok=True)
    with open(paths.build_dir() / ".helm-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.access(binary, os.X_OK):
            return binary
        return build_tool(["bash", str(ROOT / "hack" / "build-binaries.sh"), "helm"], binary, why, timeout=1800)


@cache
def helm_command() -> tuple[str | None, str]:
    why: list[str] = []
    found = _locate_helm(why)
    if found is None:
        found = _build_helm(why)
    if found is None:
        return None, "; ".join(why)
    return str(found), str(found)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary, source = helm_command()
    if binary is None:
        msg = f"no helm: {source}"
        warnings.warn(msg, stacklevel=2)
        cannot_run("chart", msg)
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/helm-cache", "HELM_CONFIG_HOME": "/tmp/helm-config",
           "HELM_DATA_HOME": "/tmp/helm-data"}
    proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=env)
    if check and proc.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def template(*sets: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The chart rendered with ``--set`` arguments (hooks included, as `helm template` shows them)."""
    return copy.deepcopy(list(_template(sets, namespace)))


@cache
def _template(sets: tuple[str, ...], namespace: str) -> tuple[dict[str, Any], ...]:
    args = ["template", RELEASE, str(CHART), "--namespace", namespace]
    for s in sets:
        args += ["--set", s]
    return tuple(d for d in yaml.safe_load_all(helm(*args).stdout) if d)


def split_hooks(objs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    hooks = [o for o in objs if HOOK in (o["metadata"].get("annotations") or {})]
    return [o for o in objs if o not in hooks], hooks
