"""A real elastic torchrun job through volcano-elastic (issue targets as assertions): it starts at
min and takes its elastic workers, is shrunk by our in-cluster agent for a gang (real eviction,
SIGTERM, grace period), resumes at the smaller world size from its shared checkpoint, grows back
after the gang, and its PyTorchJob ends Succeeded with every step done; steps redone at most the
steps since the last checkpoint. The scenario is bench/real_training.py's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.real.test_install import NAMESPACE, RELEASE, helm, wait_installed

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import real_training as rt

CHECKPOINT_EVERY = 20  # examples/training/elastic_train.py's default


def test_elastic_torchrun_job_shrinks_for_a_gang_grows_back_and_succeeds(box: Any, kube: Any) -> None:
    from kubernetes import client

    box.kubectl("create", "namespace", NAMESPACE, check=False)
    rt.install(box, 0, "")
    try:
        wait_installed(box, kube(client.CoreV1Api))
        result = rt.run(box, steps=400, gangs=1, max_restarts=10, notice_seconds=0, baseline=False,
                        shared_root=box.dir / "shared")
    finally:
        helm(box, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "180s")
    summary = {k: v for k, v in result.items() if k != "log"}
    print("\n[real] training: " + json.dumps(summary))
    assert result["succeeded"], summary
    assert result["stepsDone"] == result["stepsTarget"], summary
    kinds = [e["kind"] for e in result["events"]]
    assert "shrink" in kinds and "grow" in kinds, summary
    shrink = next(e for e in result["events"] if e["kind"] == "shrink")
    assert shrink["toWorkers"] >= 2  # never below min
    for e in result["events"]:
        assert e["stepsRedone"] <= CHECKPOINT_EVERY, e
    assert not result["gatedLeft"]
