"""Every tier: the run's summary says which cluster tiers were allowed to skip on this host, and why
(tests/harness/required.py decides when a tier that cannot run fails instead)."""

from __future__ import annotations

import pytest

from tests.harness import required
from tests.harness.boxfixtures import release_unneeded_boxes


def pytest_runtest_setup(item: pytest.Item) -> None:
    release_unneeded_boxes(item)  # boxes without real nodes, once no test left needs them


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    lines, words = required.summary(required.SKIPPED)
    if words is None:
        return
    terminalreporter.section("cluster tiers skipped (allowed here: not CI, not root with the node packages)",
                             yellow=True)
    for line in lines:
        terminalreporter.write_line(line)
    terminalreporter.stats.setdefault(words, []).append(words)  # one more entry of pytest's summary line
