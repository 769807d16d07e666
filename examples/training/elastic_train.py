"""A small elastic training job: what volcano-elastic expects of training code, end to end.

torch on CPU with gloo, a tiny model, synthetic data that depends only on the step (so a resumed
run sees exactly the batches it would have seen), checkpoints on a shared volume every
``--checkpoint-every`` steps and whenever an eviction notice is pending, the learning rate and
per-rank batch scaled with the world size. Run it under torchrun (or the job kit's launcher,
``python -m volcano_elastic_job.run``, which also ends a rendezvous as soon as the size the agent
announced has joined):

    torchrun --nnodes=2:4 --rdzv-backend=c10d --rdzv-endpoint=HOST:29400 elastic_train.py \\
        --steps 300 --dir /shared/run-1

Rank 0 appends one JSON line per step to ``DIR/progress.jsonl`` (step, world size, loss, time,
torchelastic restart count): the real-node tier and ``bench/real_training.py`` read it to find the
stall of each scale event and the steps redone. The job ends 0 when every step is done.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

SPAWNED = time.time()  # before `import torch`: the restart part of a scale event starts here

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import volcano_elastic_job as kit  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

GLOBAL_BATCH = 64
BASE_LR = 0.05
BASE_WORLD = 2


def batch(step: int, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of the step's global batch (the same global batch at any world size)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 16, generator=g)
    y = x.sum(dim=1, keepdim=True) * 0.5 + 1.0 + 0.3 * torch.randn(GLOBAL_BATCH, 1, generator=g)  # loss floor ~0.09
    per = kit.split_batch(GLOBAL_BATCH, world)
    return x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]


def save(path: Path, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
    os.replace(tmp, path)  # atomic: a SIGKILL mid-save never leaves a torn checkpoint


def warm_up(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    """One training step on copies of the model and the optimizer: a process's first step pays for
    lazy initialisations (autograd's threads, the optimizer's first step; torch 2.x imports more on
    it), which a newcomer to a running group would otherwise pay at its first step in the group,
    while every rank waits for it. On copies: the real state is not touched."""
    twin = copy.deepcopy(model)
    twin_opt = type(opt)(twin.parameters(), **opt.defaults)
    x, y = batch(0, 0, 1)
    torch.nn.functional.mse_loss(twin(x), y).backward()
    twin_opt.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dir", required=True, help="shared directory: checkpoint and progress log")
    ap.add_argument("--checkpoint-every", type=int, default=20)
    ap.add_argument("--step-seconds", type=float, default=0.2, help="simulated compute per step")
    ap.add_argument("--notice-every", type=int, default=5, help="steps between looks at the notice")
    ap.add_argument("--in-place", action="store_true",
                    help="resize in place (volcano_elastic_job.InPlace): one process per pod, no torchrun")
    ap.add_argument("--timeout", type=float, default=30.0, help="in place: the process group's timeout (s)")
    ap.add_argument("--momentum", type=float, default=0.0, help="SGD momentum (optimizer state a newcomer must get)")
    a = ap.parse_args()

    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    ckpt = d / "checkpoint.pt"
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=BASE_LR, momentum=a.momentum)
    start = 0
    if ckpt.exists():
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["step"])

    def rescale(world: int) -> None:  # the saved (or sent) lr was for another world size
        for group in opt.param_groups:
            group["lr"] = kit.scale_lr(BASE_LR, BASE_WORLD, world)

    job: kit.InPlace | None = None
    if a.in_place:  # one process per pod, no torchrun: the group re-forms in place at a planned event
        warm_up(model, opt)  # a newcomer: before it joins, while the others train
        job = kit.InPlace(model, opt, backend="gloo", every=a.notice_every, start_step=start,
                          timeout=a.timeout, on_resize=lambda j: rescale(j.world))
        steps: Iterator[int] = job.steps(a.steps)
        rescale(job.world)
    else:
        dist.init_process_group("gloo")
        rescale(dist.get_world_size())
        ddp = DistributedDataParallel(model)
        steps = iter(range(start, a.steps))
    rank, world = dist.get_rank(), dist.get_world_size()
    # The eviction notice is the restart path's: in place, a pod that leaves is told by `leaving` and
    # InPlace takes it out of the group (its pod also carries `evict-after`, the agent's deadline for
    # the leave: holding that rank for the eviction would stall the group until the deadline).
    watch = None if job is not None else kit.NoticeWatch(every=a.notice_every,
                                                         all_reduce_max=kit.torch_all_reduce_max())
    log = open(d / "progress.jsonl", "a", buffering=1) if rank == 0 else None  # noqa: SIM115 - the run's log
    if log:
        log.write(json.dumps({"event": "start", "from": start if job is None else job.step, "world": world,
                              "t": time.time(), "spawned": SPAWNED, "restart": kit.restart_count(),
                              "inPlace": job is not None, "torch": torch.__version__}) + "\n")

    def checkpoint(step: int, why: str) -> None:
        if rank == 0:
            save(ckpt, step, model, opt)
        dist.barrier()
        if rank == 0:  # one process records (global rank 0, as NoticeWatch.checkpoint does)
            kit.record_checkpoint()  # this pod's volcano-elastic.io/last-checkpoint-time
        if log:
            log.write(json.dumps({"event": "checkpoint", "step": step, "why": why, "t": time.time()}) + "\n")

    for step in steps:
        if job is not None:  # the group may have re-formed before this step: new rank, size, DDP
            rank, world, ddp = job.rank, job.world, job.ddp
        x, y = batch(step, rank, world)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        time.sleep(a.step_seconds)
        done = step + 1
        if log:
            log.write(json.dumps({"step": done, "world": world, "loss": round(float(loss), 6),
                                  "t": time.time(), "restart": kit.restart_count(),
                                  "generation": job.generation if job else 0}) + "\n")
        if watch is not None and watch.checkpoint_now(done):
            checkpoint(done, "notice")
            if watch.victim:  # this rank's pod is evicted next: say so in the log (other ranks are quiet)
                with open(d / "progress.jsonl", "a") as f:
                    f.write(json.dumps({"event": "hold", "rank": rank, "step": done, "t": time.time()}) + "\n")
            watch.hold()  # the victim's rank waits for its eviction (its SIGTERM ends the wait): nothing redone
        elif done % a.checkpoint_every == 0 or done == a.steps:
            checkpoint(done, "interval")
    if job is not None and job.left:
        return  # this pod left the group (and was not evicted within the grace): end 0
    if log:
        log.write(json.dumps({"event": "done", "steps": a.steps, "t": time.time(),
                              "resizes": job.events if job else []}) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
