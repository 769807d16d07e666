"""e2e tier: the whole box: etcd, kube-apiserver, kube-controller-manager, Volcano scheduler
(our configuration) and controllers, kwok GPU nodes (4 x 8 nvidia.com/gpu), the training
operator. Fixtures: see tests/harness/boxfixtures.py."""

from __future__ import annotations

import pytest

from tests.harness.boxfixtures import *  # noqa: F403 - the shared fixtures
from tests.harness.boxfixtures import box_fixture, mark_tier

box = box_fixture("full")
pytest_collection_modifyitems = mark_tier(__file__, pytest.mark.e2e)
