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
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.boxfixtures import *  # noqa: F403 - the shared fixtures
from tests.harness.boxfixtures import box_fixture
from tests.harness.realstack import failure_report

box = box_fixture("full", real_nodes=int(os.environ.get("VOLCANO_ELASTIC_REAL_NODES", "2")))

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.real)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                       pytest.TestReport]:
    """A failed real test's report carries our controller's log and the training pods' logs of its
    run (`realstack.failure_report`): the CI log is all that is left of a fresh machine's run."""
    report = yield
    if report.when != "call" or not report.failed:
        return report
    funcargs: dict[str, Any] = getattr(item, "funcargs", {})
    b = funcargs.get("box") or funcargs.get("installed")
    if b is None or not hasattr(b, "kubectl"):
        return report
    try:
        text = failure_report(b, int(time.time() - call.start) + 30)
    except Exception as exc:  # a report must never hide the failure it reports
        text = f"(no failure report: {exc!r})"
    report.sections.append(("what the real tier left (controller and pod logs)", text))
    return report
