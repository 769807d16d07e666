"""Real-node tier: the whole box with real nodes instead of kwok ones: two kubelets, each with its
own containerd, bridge networking, CoreDNS and a kube-scheduler (hack/localbox/realnode.py), our
image and the training image built here without Docker (hack/localbox/image.py) and imported into
both nodes. Pods really run: processes, SIGTERM, grace periods, downward-API files, node loss.

Where this host cannot run real nodes (not root, no cgroups or overlayfs, the runtime packages
missing) or an image cannot be built, the tier fails with the reason in CI and as root with the node
packages installed, and skips elsewhere, named in the run's summary line (tests/harness/required.py);
`make test-real` runs only this tier. VOLCANO_ELASTIC_REAL_NODES sets the node count (default 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.boxfixtures import *  # noqa: F403 - the shared fixtures
from tests.harness.boxfixtures import box_fixture

box = box_fixture("full", real_nodes=int(os.environ.get("VOLCANO_ELASTIC_REAL_NODES", "2")))

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.real)
