"""e2e tier: the whole box: etcd, kube-apiserver, kube-controller-manager, Volcano scheduler
(our configuration) and controllers, kwok GPU nodes (4 x 8 nvidia.com/gpu), the training
operator. Fixtures: see tests/boxfixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.boxfixtures import *  # noqa: F403 - the shared fixtures
from tests.boxfixtures import box_fixture

box = box_fixture("full")

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)
