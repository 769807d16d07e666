"""``helm install`` / ``helm uninstall`` of charts/volcano-elastic on a real API server.

The box has no kubelet, so the chart is installed the way the local overlay is: our webhook runs
as a local process and the webhook configurations reach it by URL (``certs.mode=external``,
``admission.url``, ``admission.caBundle``), with no Deployments. Everything else (ServiceAccounts,
least-privilege RBAC, the ConfigMap, both webhook configurations) is the chart's, installed and
removed by helm. The chart gets a box of its own (its cluster-scoped objects have the same names as
the ones tests/integration/test_manifests_apply.py applies with kubectl into the shared box).

1. After ``helm install`` the webhook works: an elastic worker pod of a PyTorchJob is mutated (gang,
   role, scale-up gate) and a broken elastic job is denied with our message.
2. ``helm uninstall`` removes every object of the release; then the documented step (the
   post-delete hook needs a kubelet to run its Job) lifts the gate the webhook set:
   ``volcano-elastic release-gates --all``. No pod is left gated.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hack.localbox import Box
from hack.localbox.ours import webhook_argv
from tests.harness.appliedbox import answers_ready, kubectl, operator_pod, wait_for
from tests.harness.chart import CHART
from tests.harness.helmbox import helm, own_box
from tests.harness.manifests import MANIFESTS

pytestmark = pytest.mark.integration

NAMESPACE = "volcano-elastic-system"
RELEASE = "volcano-elastic"
GATE = "volcano-elastic.io/scale-up"


@pytest.fixture(scope="module")
def helm_box(request: pytest.FixtureRequest) -> Iterator[Box]:
    yield from own_box("helm", request.config)


def _helm(box: Box, *args: str) -> subprocess.CompletedProcess[str]:
    return helm(box, *args, timeout=180, required=False)  # no helm binary: the tier cannot run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gates(box: Box, ns: str, name: str) -> list[str]:
    pod = json.loads(kubectl(box, "get", "pod", "-n", ns, name, "-o", "json").stdout)
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def test_helm_install_webhook_works_and_uninstall_leaves_no_gate(helm_box: Box, tmp_path: Path) -> None:
    box = helm_box
    cert, key = box.issue_serving_cert(tmp_path)
    port = _free_port()
    team = f"team-{uuid.uuid4().hex[:5]}"
    assert kubectl(box, "create", "namespace", NAMESPACE).returncode == 0
    labelled = kubectl(box, "label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted")
    assert labelled.returncode == 0, labelled.stderr
    assert kubectl(box, "create", "namespace", team).returncode == 0

    install = _helm(box, "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--wait", "--timeout", "120s",
                    "--set", "webhook.enabled=false", "--set", "controller.enabled=false",
                    "--set", "certs.mode=external", "--set", f"admission.url=https://127.0.0.1:{port}",
                    "--set-file", f"admission.caBundle={box.ca_file}")
    assert install.returncode == 0, install.stderr
    manifest = [d for d in yaml.safe_load_all(_helm(box, "get", "manifest", RELEASE, "-n", NAMESPACE).stdout) if d]
    kinds = {d["kind"] for d in manifest}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} <= kinds
    hooks = _helm(box, "get", "hooks", RELEASE, "-n", NAMESPACE).stdout
    assert "helm.sh/hook: post-delete" in hooks and "release-gates" in hooks

    log = tmp_path / "webhook.log"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_load(kubectl(box, "get", "configmap", "-n", NAMESPACE, "volcano-elastic-config",
                                             "-o", "yaml").stdout)["data"]["config.yaml"])
    with open(log, "w") as out:
        webhook = subprocess.Popen(webhook_argv(cert, key, port, config), stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        wait_for("our webhook", answers_ready(port, box.ca_file), 30, log)
        # 1. the webhook works through the configurations helm installed
        pod = operator_pod(team, "j", 3, "2:8")

        def created() -> bool:
            return kubectl(box, "create", "-f", "-", stdin=json.dumps(pod)).returncode == 0

        wait_for("the elastic pod admitted through the chart's webhook configuration", created, 30, log)
        got = json.loads(kubectl(box, "get", "pod", "-n", team, "j-worker-3", "-o", "json").stdout)
        assert got["spec"]["schedulerName"] == "volcano"
        assert got["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "j"
        assert got["metadata"]["annotations"]["volcano-elastic.io/role"] == "elastic"
        assert _gates(box, team, "j-worker-3") == [GATE]
        job = next(d for d in yaml.safe_load_all((MANIFESTS / "examples" / "pytorchjob-elastic.yaml").read_text())
                   if d and d["kind"] == "PyTorchJob")
        job["metadata"]["namespace"] = team
        job["spec"]["elasticPolicy"]["minReplicas"] = job["spec"]["elasticPolicy"]["maxReplicas"] + 1
        denied = kubectl(box, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(job))
        assert denied.returncode != 0 and "is greater than maxReplicas" in denied.stderr, denied.stderr
    finally:
        os.killpg(webhook.pid, 15)
        webhook.wait(10)

    # 2. uninstall: the hook Job cannot run without a kubelet, so the documented step instead
    uninstall = _helm(box, "uninstall", RELEASE, "--namespace", NAMESPACE, "--no-hooks", "--wait")
    assert uninstall.returncode == 0, uninstall.stderr
    for d in manifest:
        args = ["get", d["kind"].lower(), d["metadata"]["name"], "--ignore-not-found", "-o", "name"]
        if d["metadata"].get("namespace"):
            args += ["-n", d["metadata"]["namespace"]]
        deadline = time.monotonic() + 30
        while kubectl(box, *args).stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not kubectl(box, *args).stdout.strip(), f"{d['kind']} {d['metadata']['name']} survived uninstall"
    assert _gates(box, team, "j-worker-3") == [GATE], "nothing lifts the gate by itself"
    release = subprocess.run([sys.executable, "-m", "elastic_controller", "release-gates", "--all",
                              f"--kubeconfig={box.kubeconfig}"], capture_output=True, text=True, timeout=60)
    assert release.returncode == 0, release.stderr
    assert f"lifted {GATE} from {team}/j-worker-3" in release.stdout
    assert _gates(box, team, "j-worker-3") == []
    # with the webhook configurations gone, new PyTorchJob pods no longer depend on the webhook
    later = operator_pod(team, "j", 2, "2:8")
    assert kubectl(box, "create", "-f", "-", stdin=json.dumps(later)).returncode == 0
    assert _gates(box, team, "j-worker-2") == []
