"""Whether a tier that cannot run on this host fails or skips, and the summary of what skipped.

A tier that needs a cluster (integration, e2e, real nodes) is *required* in CI (``CI`` set, as every
CI service does) and wherever the README's test command is run as root with the node packages
installed (hack/install-node-packages.sh): there a test of it that cannot run fails with the
reason, so that "our image failed to build" or "the box did not start" never reads as a green run.
Anywhere else (a developer machine without root, say) it skips, and the run's summary line says
which tiers skipped and why.

``required_because`` and ``verdict`` are pure (tests/unit/test_required_tiers.py); ``cannot_run``
applies the verdict on this host and remembers the skip for ``pytest_terminal_summary``
(tests/conftest.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

import pytest

FALSE = ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Host:
    """What decides whether the cluster tiers are required here."""

    ci: bool  # CI is set (GitHub Actions, GitLab, Buildkite, ... all set CI=true)
    root: bool
    missing_node_packages: tuple[str, ...]  # what hack/install-node-packages.sh would install


@dataclass(frozen=True)
class Verdict:
    fail: bool
    message: str


def host_of(environ: Mapping[str, str], euid: int, missing_node_packages: tuple[str, ...]) -> Host:
    return Host(ci=environ.get("CI", "").strip().lower() not in FALSE, root=euid == 0,
                missing_node_packages=missing_node_packages)


def required_because(host: Host) -> str | None:
    """Why the cluster tiers must run here, or None when they may skip."""
    if host.ci:
        return "CI is set"
    if host.root and not host.missing_node_packages:
        return "running as root with the node packages installed"
    return None


def verdict(tier: str, reason: str, host: Host) -> Verdict:
    """What a test of ``tier`` does when it cannot run for ``reason`` on ``host``."""
    why = required_because(host)
    if why is not None:
        return Verdict(True, f"the {tier} tier is required here ({why}) and cannot run: {reason}")
    allowed = "not root" if not host.root else f"node packages missing: {', '.join(host.missing_node_packages)}"
    return Verdict(False, f"SKIPPING the {tier} tier ({allowed}, not CI): {reason}")


def summary(skipped: Mapping[str, str]) -> tuple[list[str], str | None]:
    """The lines listing each skipped tier and why, and the words for pytest's summary line."""
    if not skipped:
        return [], None
    lines = [f"{tier}: {reason}" for tier, reason in sorted(skipped.items())]
    return lines, f"tier{'s' if len(skipped) > 1 else ''} skipped, not required here: {', '.join(sorted(skipped))}"


# tier -> the first reason it could not run, for the terminal summary of this session
SKIPPED: dict[str, str] = {}


def this_host() -> Host:
    from hack.localbox.realnode import missing_node_packages

    return host_of(os.environ, os.geteuid(), tuple(missing_node_packages()))


def cannot_run(tier: str, reason: str, config: pytest.Config | None = None) -> NoReturn:
    """Fail (required here) or skip (said loudly, and in the summary) a test of ``tier``."""
    v = verdict(tier, reason, this_host())
    if v.fail:
        pytest.fail(v.message, pytrace=False)
    SKIPPED.setdefault(tier, reason)
    tr = config.pluginmanager.get_plugin("terminalreporter") if config is not None else None
    if tr is not None:
        tr.write_line(v.message, red=True, bold=True)
    pytest.skip(v.message)
