"""Integration tier: a real kube-apiserver + etcd + kube-controller-manager (GC, namespace,
service account, disruption, resource quota) with every CRD installed, no scheduler and no
nodes. Fixtures: see tests/harness/boxfixtures.py."""

from __future__ import annotations

import pytest

from tests.harness.boxfixtures import *  # noqa: F403 - the shared fixtures
from tests.harness.boxfixtures import box_fixture, mark_tier

box = box_fixture("core")
pytest_collection_modifyitems = mark_tier(__file__, pytest.mark.integration)
