"""``helm`` against a box (hack/localbox), for the tiers that install charts/volcano-elastic, with
Helm 3 (``helm``) or Helm 4 (``helm4``, built by ``bash hack/build-binaries.sh helm4``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.harness.chart import helm_command
from tests.harness.required import cannot_run

if TYPE_CHECKING:
    from hack.localbox import Box


def helm4_command() -> tuple[str | None, str]:
    """The Helm 4 that hack/build-binaries.sh built for hack/versions.env's HELM4_VERSION, or None
    and why (a helm4 of another version does not count: the test is of the pinned one)."""
    from hack.localbox import paths

    binary = paths.binary("helm4")
    pin = paths.versions().get("HELM4_VERSION", "")
    if not os.access(binary, os.X_OK):
        return None, f"no {binary} (bash hack/build-binaries.sh helm4)"
    proc = subprocess.run([str(binary), "version", "--template", "{{.Version}}"], capture_output=True, text=True,
                          timeout=30)
    if proc.stdout.strip() != pin:
        said = proc.stdout.strip() or proc.stderr.strip()
        return None, f"{binary} is {said!r}, not {pin} (bash hack/build-binaries.sh helm4)"
    return str(binary), str(binary)


def helm_env(box: Any | None = None) -> dict[str, str]:
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/helm-cache", "HELM_CONFIG_HOME": "/tmp/helm-config",
           "HELM_DATA_HOME": "/tmp/helm-data"}
    if box is not None:
        env["KUBECONFIG"] = str(box.kubeconfig)
    return env


def helm(box: Any, *args: str, timeout: float = 300, required: bool = True,
         major: int = 3) -> subprocess.CompletedProcess[str]:
    """Run ``helm ARGS`` on ``box`` (its admin kubeconfig; helm's cache and config under /tmp), output
    captured; ``major=4`` runs Helm 4. No helm binary fails the test, or, when not ``required``, is a
    tier that cannot run (tests/harness/required.py: fails in CI and as root with the node packages)."""
    binary, source = helm_command() if major == 3 else helm4_command()
    if binary is None:
        if required:
            pytest.fail(f"no helm binary: {source}")
        cannot_run("integration", f"no helm binary: {source}")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, env=helm_env(box))


def own_box(suffix: str, config: pytest.Config | None = None) -> Iterator[Box]:
    """A core box of the test module's own (a chart install is cluster-wide), taken down afterwards
    unless VOLCANO_ELASTIC_KEEP_BOX=1; a box that cannot start is a tier that cannot run."""
    from hack.localbox import Box, BoxOptions, describe_missing, missing_binaries
    from hack.localbox.box import PROFILES

    missing = missing_binaries(PROFILES["core"])
    if missing:
        cannot_run("integration", f"control plane box not started: {describe_missing(missing)}", config)
    box = Box(BoxOptions(name=f"pytest-{os.getpid()}-{suffix}", profile="core", quiet=True))
    box.up()
    try:
        yield box
    finally:
        if os.environ.get("VOLCANO_ELASTIC_KEEP_BOX") != "1":
            box.down(quiet=True)
