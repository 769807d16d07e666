"""Our manifests applied to a box with kubectl, and the questions the API server answers about them
(can-i as a ServiceAccount, dry-run admission)."""

from __future__ import annotations

import functools
import json
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.manifests import NAMESPACE, kustomize_command, render

WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
FIELD_MANAGER = "volcano-elastic-manifest-tests"


@functools.cache
def kubectl_binary() -> str:
    """The box's kubectl; while hack/build-binaries.sh is still building it, any other one."""
    from hack.localbox import paths

    own = paths.binary("kubectl")
    if os.access(own, os.X_OK):
        return str(own)
    argv, source = kustomize_command()
    if argv is not None and argv[1:] == ("kustomize",):
        return argv[0]
    pytest.fail(f"no kubectl: {own} is not built yet ({source}); run: bash hack/build-binaries.sh kubectl")


def kubectl(box: Any, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_binary(), f"--kubeconfig={box.kubeconfig}", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def apply(box: Any, objs: list[dict[str, Any]] | str, *, dry_run: bool) -> subprocess.CompletedProcess[str]:
    text = objs if isinstance(objs, str) else yaml.safe_dump_all(objs, sort_keys=False)
    args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}", "-f", "-"]
    if dry_run:
        args.insert(1, "--dry-run=server")
    return kubectl(box, *args, stdin=text)


def accepted(proc: subprocess.CompletedProcess[str], what: str) -> str:
    assert proc.returncode == 0, f"{what} rejected by the API server:\n{proc.stderr}\n{proc.stdout[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(box: Any) -> list[dict[str, Any]]:
    """The local overlay for real, minus the webhook configurations (see the module docstring)."""
    objs = render("overlays/local")
    accepted(apply(box, [o for o in objs if o["kind"] not in WEBHOOK_KINDS], dry_run=False), "overlays/local")
    return objs


# ---------------------------------------------------------------------- can-i
def can_i(box: Any, sa: str, verb: str, group: str, resource: str, *, namespace: str | None = None,
          name: str | None = None) -> bool:
    res, _, sub = resource.partition("/")
    target = f"{res}.{group}" if group else res
    if name:
        target += f"/{name}"
    args = ["auth", "can-i", verb, target, f"--as=system:serviceaccount:{NAMESPACE}:{sa}"]
    if sub:
        args.append(f"--subresource={sub}")
    args += [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    proc = kubectl(box, *args)
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl {' '.join(args)}: {proc.stderr}"
    return answer == "yes"


# ---------------------------------------------------------------------- running as the ServiceAccounts
def sa_kubeconfig(box: Any, sa: str, path: Path, namespace: str = NAMESPACE) -> Path:
    """A kubeconfig that authenticates with a real token of the ServiceAccount ``namespace/sa``
    (TokenRequest)."""
    proc = kubectl(box, "create", "token", sa, f"--namespace={namespace}", "--duration=1h")
    assert proc.returncode == 0, proc.stderr
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": sa,
        "clusters": [{"name": "box", "cluster": {"server": box.server, "certificate-authority": str(box.ca_file)}}],
        "users": [{"name": sa, "user": {"token": proc.stdout.strip()}}],
        "contexts": [{"name": sa, "context": {"cluster": "box", "user": sa}}],
    }))
    return path


def wait_for(what: str, fn: Callable[[], Any], timeout: float, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.5)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log and log.exists() else ""
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")


def operator_pod(namespace: str, job: str, index: int, nnodes: str, *, labelled: bool = True) -> dict[str, Any]:
    labels = {"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker",
              "training.kubeflow.org/replica-index": str(index)}
    if labelled:
        labels["training.kubeflow.org/operator-name"] = "pytorchjob-controller"
    if index == 0:
        labels["training.kubeflow.org/job-role"] = "master"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{job}-worker-{index}", "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": "pytorch", "image": "pytorch",
                                     "env": [{"name": "PET_NNODES", "value": nnodes}]}]}}


def answers_ready(port: int, ca_file: Path) -> Callable[[], bool]:
    """Whether https://127.0.0.1:``port``/readyz answers 200 with a certificate of ``ca_file``."""
    ctx = ssl.create_default_context(cafile=str(ca_file))

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    return ready
