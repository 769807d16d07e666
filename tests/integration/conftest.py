"""Integration tier: a real kube-apiserver + etcd + kube-controller-manager (GC, namespace,
service account, disruption, resource quota) with every CRD installed, no scheduler and no
nodes. Fixtures: see tests/boxfixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.boxfixtures import *  # noqa: F403 - the shared fixtures
from tests.boxfixtures import box_fixture

box = box_fixture("core")

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.integration)
