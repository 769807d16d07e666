"""Validator parity against the real thing: every case of the parity table in
tests/unit/test_webhook_validate.py is sent to the box's API server (CRD schema + the training
operator v1.9.4's own validating webhook, ours not registered) with a server-side dry run. What
the operator denies, the table says it denies (and our validator denies it too); what it admits,
the table says it admits or warns about."""

from __future__ import annotations

import copy
import json
import subprocess
from typing import Any

import pytest

from elastic_controller.policy.settings import ElasticConfig
from tests.harness.validator_parity import PARITY
from webhook.validate import validate_job

pytestmark = pytest.mark.e2e


def _dry_run(box: Any, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    out: subprocess.CompletedProcess[str] = box.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                                                        check=False, input=json.dumps(obj))
    return out


def test_the_operator_webhook_is_registered(box: Any) -> None:
    out = box.kubectl("get", "validatingwebhookconfigurations", "-o", "name", check=False)
    assert "validator.training-operator.kubeflow.org" in out.stdout, out.stdout


@pytest.mark.parametrize(("obj", "operator"), [(c[1], c[2]) for c in PARITY], ids=[c[0] for c in PARITY])
def test_operator_verdicts_match_the_parity_table(box: Any, namespace: str, obj: dict[str, Any],
                                                  operator: str) -> None:
    job = copy.deepcopy(obj)
    job["metadata"]["namespace"] = namespace
    job["metadata"].pop("uid", None)
    out = _dry_run(box, job)
    denied_by_operator = out.returncode != 0
    if denied_by_operator:
        assert "denied the request" in out.stderr or "is invalid" in out.stderr, out.stderr
    assert denied_by_operator == (operator == "deny"), f"the table says {operator}; the box says:\n{out.stderr}"
    ours = validate_job(job, ElasticConfig())
    assert ours.allowed != denied_by_operator, (ours, out.stderr)
