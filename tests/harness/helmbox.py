"""``helm`` against a box (hack/localbox), for the tiers that install charts/volcano-elastic."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from tests.harness.chart import helm_command
from tests.harness.required import cannot_run


def helm(box: Any, *args: str, timeout: float = 300, required: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``helm ARGS`` on ``box`` (its admin kubeconfig; helm's cache and config under /tmp), output
    captured. No helm binary (``helm_command``) fails the test, or, when not ``required``, is a tier
    that cannot run (tests/harness/required.py: fails in CI and as root with the node packages)."""
    binary, source = helm_command()
    if binary is None:
        if required:
            pytest.fail(f"no helm binary: {source}")
        cannot_run("integration", f"no helm binary: {source}")
    env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "HELM_CACHE_HOME": "/tmp/helm-cache",
           "HELM_CONFIG_HOME": "/tmp/helm-config", "HELM_DATA_HOME": "/tmp/helm-data"}
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, env=env)
