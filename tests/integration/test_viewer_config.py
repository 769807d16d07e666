"""Issue 40, high 1, against a real API server: someone bound only to the shipped viewer ClusterRole and
Role runs plain ``status`` and ``queues`` (no ``--config``) on a kustomize install and they decide with
the ConfigMap the controller's Deployment mounts (its name hashed by kustomize), saying so; without the
Role they say plainly that they cannot read it and which Role to bind, and fall back to the defaults.
The Role grants no other ConfigMap."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli.effective_config import CONFIG_VOLUME, CONTROLLER_DEPLOYMENT, VIEWER_ROLE
from tests.harness.appliedbox import WEBHOOK_KINDS, accepted, apply, can_i, kubectl, sa_kubeconfig
from tests.harness.manifests import NAMESPACE, render

pytestmark = pytest.mark.integration

SA = "volcano-elastic-config-viewer-test"
RBAC = "rbac.authorization.k8s.io"


def cli(kubeconfig: Path, *argv: str) -> tuple[dict[str, Any], str]:
    proc = subprocess.run([sys.executable, "-m", "elastic_controller", *argv, f"--kubeconfig={kubeconfig}",
                           "-o", "json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{argv}: {proc.stderr}"
    return dict(json.loads(proc.stdout)), proc.stderr


def test_a_viewer_reads_the_configuration_the_controller_runs_with(box: Any, tmp_path: Path) -> None:
    installed = render("overlays/local")  # as test_manifests_apply installs it (idempotent)
    accepted(apply(box, [o for o in installed if o["kind"] not in WEBHOOK_KINDS], dry_run=False), "overlays/local")
    hashed = next(o["metadata"]["name"] for o in installed
                  if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("volcano-elastic-config-"))
    # The controller's Deployment as manifests/base ships it (the local overlay runs the controller as a
    # process instead), scaled to zero: nothing runs, but it names the ConfigMap it mounts.
    deployment = copy.deepcopy(next(o for o in render("base") if o["kind"] == "Deployment"
                                    and o["metadata"]["name"] == CONTROLLER_DEPLOYMENT))
    deployment["spec"]["replicas"] = 0
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == CONFIG_VOLUME)
    assert volume["configMap"]["name"] == hashed, "manifests/base and overlays/local hash one config.yaml alike"
    binding = {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding", "metadata": {"name": SA, "namespace": NAMESPACE},
               "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": VIEWER_ROLE},
               "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]}
    objs = [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": NAMESPACE}},
            {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": SA},
             "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": VIEWER_ROLE},
             "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]},
            binding, deployment]
    accepted(apply(box, objs, dry_run=False), "the viewer's bindings and the controller's Deployment")
    try:
        kc = sa_kubeconfig(box, SA, tmp_path / "viewer.kubeconfig")
        want = f"ConfigMap {NAMESPACE}/{hashed} (what the controller runs with)"
        status, err = cli(kc, "status")
        assert status["configSource"] == want and err == "", err
        queues, err = cli(kc, "queues")
        assert queues["configSource"] == want and err == "", err
        assert can_i(box, SA, "get", "", "configmaps", namespace=NAMESPACE, name=hashed)
        assert not can_i(box, SA, "get", "", "configmaps", namespace=NAMESPACE, name="kube-root-ca.crt")
        assert not can_i(box, SA, "list", "", "configmaps", namespace=NAMESPACE)

        kubectl(box, "delete", "rolebinding", SA, f"--namespace={NAMESPACE}")
        status, err = cli(kc, "status")
        assert status["configSource"] == "defaults (built in)"
        assert err.startswith(f"volcano-elastic status: warning: not allowed to read ConfigMap {NAMESPACE}/"
                              f"volcano-elastic-config or Deployment {NAMESPACE}/{CONTROLLER_DEPLOYMENT}: the Role "
                              f"{VIEWER_ROLE} in namespace {NAMESPACE} grants it"), err
    finally:
        kubectl(box, "delete", "deployment", CONTROLLER_DEPLOYMENT, f"--namespace={NAMESPACE}", "--ignore-not-found")
        kubectl(box, "delete", "rolebinding", SA, f"--namespace={NAMESPACE}", "--ignore-not-found")
        kubectl(box, "delete", "clusterrolebinding", SA, "--ignore-not-found")
        kubectl(box, "delete", "serviceaccount", SA, f"--namespace={NAMESPACE}", "--ignore-not-found")
