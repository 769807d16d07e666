"""A job the controller serves is not logged as refused (issue 23, minor)."""

from __future__ import annotations

import logging

import pytest

from tests.harness import builders as b
from tests.harness.controllerworld import make, reasons


def test_a_missing_queue_is_a_warning_not_a_refusal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="elastic_controller.controller")
    _, ctl, rec = make(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4, queue="vision"))
    assert ctl.reconcile("ns/j").action == "created"
    assert reasons(rec) == ["QueueNotFound"]
    messages = [r.getMessage() for r in caplog.records]
    assert "job refused" not in messages and "job warning" in messages


def test_an_invalid_job_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="elastic_controller.controller")
    _, ctl, _ = make(b.pytorchjob("ns", "j", workers=4, min_r=5, max_r=4))
    ctl.reconcile("ns/j")
    assert "job refused" in [r.getMessage() for r in caplog.records]
