"""In-place resizing with real processes: torch, gloo, one process per "pod" on this host, the agent
played through the pods' annotation files (bench/inplace_resize.py, which this runs). No cluster:
it needs Debian's python3-torch on the host (hack/install-node-packages.sh installs it with the
real nodes' packages), not the box.

The stall is bounded, so a job that silently fell back to restarting cannot pass: each planned
event must be done in place within 2 s, with no step done twice and every step done, and at most a
quarter of the restart of the same event on the same machine. That restart is a lower bound (spawn,
import torch, load; no pod, no torchrun): on a fast machine it is about 1.3 s for this tiny model
(CI, 2026-11-29: in place 0.175 s against 1.27 s, 0.14x), so the issue's 0.1x is held against the
real tier's restart path (pods, the kit's rendezvous: tests/real/test_inplace_training.py), not
against this bound; a SIGKILLed pod must end the others with an error (no hang) and the job must
still complete from its checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.required import cannot_run

ROOT = Path(__file__).resolve().parents[2]
STALL_LIMIT = 2.0
RATIO_LIMIT = 0.25  # against the restart's lower bound; see the docstring


def torch_python() -> str | None:
    candidates = [os.environ.get("VOLCANO_ELASTIC_TORCH_PYTHON", ""), "/usr/bin/python3",
                  str(Path.home() / ".cache/volcano-elastic/torch/deb-1.13/bin/python")]
    for c in candidates:
        if c and Path(c).exists() and subprocess.run([c, "-c", "import torch.distributed"],
                                                     capture_output=True).returncode == 0:
            return c
    return None


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    py = torch_python()
    if py is None:
        sys.path.insert(0, str(ROOT))
        from hack.localbox.realnode import host_problems

        problems = host_problems()
        if problems:  # the whole real tier cannot run on this host, for the same reasons
            cannot_run("real", "; ".join(problems))
        pytest.fail("no python with torch on this host: the real tier needs Debian's python3-torch "
                    "(sudo bash hack/install-node-packages.sh), or VOLCANO_ELASTIC_TORCH_PYTHON")
    out = tmp_path_factory.mktemp("inplace") / "result.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "inplace_resize.py"), "--out", str(out),
                          "--python", py, "--steps", "160", "--shrink-at", "20", "--grow-at", "40"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-12000:]  # with the pods' log tails (Job.tails)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def job(result: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [j for j in result["jobs"] if j["job"] == name]
    assert len(found) == 1, name
    return found[0]


def test_planned_shrink_and_grow_are_done_in_place_within_the_stall_bound(result: dict[str, Any]) -> None:
    j = job(result, "in-place")
    assert j["succeeded"] and j["everyStepDone"] and j["failures"] == 0, j
    assert [(e["kind"], e["from"], e["to"]) for e in j["events"]] == [("shrink", 4, 2), ("grow", 2, 4)], j
    for e in j["events"]:
        assert e["inPlace"], e  # no process of the job restarted
        assert e["stepsRedone"] == 0, e
        assert e["stallSeconds"] <= STALL_LIMIT, e
    assert [(r["from"], r["to"], r["newcomers"]) for r in j["resizes"]] == [(4, 2, 0), (2, 4, 2)]  # the kit's account
    assert all(r["consistent"] for r in j["resizes"])  # every rank held the same model and optimizer state


def test_in_place_is_at_most_a_quarter_of_the_restart_lower_bound_for_the_same_event(result: dict[str, Any]) -> None:
    r = job(result, "restart")
    assert r["succeeded"] and r["everyStepDone"], r
    assert [(e["kind"], e["inPlace"]) for e in r["events"]] == [("shrink", False), ("grow", False)], r
    assert set(result["compare"]) == {"shrink", "grow"}
    for kind, c in result["compare"].items():
        assert c["ratio"] <= RATIO_LIMIT, (kind, c)


def test_a_sigkill_falls_back_to_the_restart_and_the_job_completes(result: dict[str, Any]) -> None:
    k = job(result, "kill")
    assert k["succeeded"] and k["everyStepDone"], k
    assert k["failures"] == 1 and k["fallbacks"][0]["failed"] == ["w3"], k
    assert k["fallbacks"][0]["othersHung"] == [], k  # the survivors ended with an error, by themselves
    (e,) = k["events"]
    assert not e["inPlace"] and (e["from"], e["to"]) == (4, 4), e


NO_DDP = r'''
import json, os, time
import torch
import volcano_elastic_job as kit
torch.manual_seed(int(os.environ["SEED"]))  # the newcomer starts from other weights: only the sync fixes that
model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
job = kit.InPlace(model, opt, ddp=False, every=1, timeout=10)
print("formed", job.world, flush=True)
for step in job.steps(int(os.environ["STEPS"])):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step))
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    for p in model.parameters():  # the gradients averaged by hand, without DDP
        torch.distributed.all_reduce(p.grad)
        p.grad /= job.world
    opt.step()
    time.sleep(0.05)
print(json.dumps({"events": job.events, "fingerprint": job.fingerprint(), "step": job.step}))
'''


def test_a_newcomer_without_ddp_gets_the_model_and_adams_state(tmp_path: Path) -> None:
    """ddp=False: the model is sent by broadcast; Adam's state (exp_avg, exp_avg_sq, step) by the
    skeleton and its tensors. The newcomer was seeded differently: equal fingerprints at the end
    mean it trained on the same state."""
    py = torch_python()
    if py is None:
        cannot_run("real", "no python with torch (test_planned_shrink_and_grow_... says why)")
    script = tmp_path / "train.py"
    script.write_text(NO_DDP)
    port = subprocess.run([sys.executable, "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); "
                           "print(s.getsockname()[1])"], capture_output=True, text=True, check=True).stdout.strip()
    notes = {pod: tmp_path / f"{pod}.annotations" for pod in ("w0", "w1", "w2")}
    for path in notes.values():
        path.write_text('volcano-elastic.io/target-workers="2"\n')

    def start(pod: str, seed: int) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "jobkit" / "src"), POD_NAME=pod, SEED=str(seed), STEPS="400",
                   VOLCANO_ELASTIC_STORE=f"127.0.0.1:{port}", VOLCANO_ELASTIC_STORE_POD="w0",
                   VOLCANO_ELASTIC_PODINFO=str(notes[pod]))
        return subprocess.Popen([py, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    procs = [start("w0", 1), start("w1", 1)]
    assert procs[0].stdout is not None
    assert procs[0].stdout.readline().split() == ["formed", "2"]  # the first group, before the event
    time.sleep(1)
    for path in notes.values():
        path.write_text('volcano-elastic.io/resize-generation="1"\nvolcano-elastic.io/target-workers="3"\n')
    procs.append(start("w2", 2))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert [(e["from"], e["to"], e["newcomers"], e["consistent"]) for e in outs[0]["events"]] == [(2, 3, 1, True)]
    assert outs[2]["step"] == outs[0]["step"] == 400
    assert len({o["fingerprint"] for o in outs}) == 1, outs
