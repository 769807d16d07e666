"""Resize a running job in place: the training processes survive a planned scale event.

Opt-in, per job: the PyTorchJob says ``volcano-elastic.io/resize: in-place`` and the training code
uses :class:`InPlace` instead of ``init_process_group`` and torchrun (one process per pod, started
directly). volcano-elastic's agent announces each planned event on the job's pods before anything
happens (podinfo: ``resize-generation``, ``target-workers``, and ``leaving`` on the pods that leave);
then, at a step boundary every rank agrees on (one small all-reduce every ``every`` steps):

- a **shrink**: the leaving ranks leave the group and write ``volcano-elastic.io/left`` on their pod
  (the agent evicts it then); the survivors re-form the process group at the new size and go on
  from the same step with the model and optimizer they hold;
- a **grow**: the new pods' processes start, import torch and build their model while the others
  train, then register in the store; once as many have registered as the event needs, the group
  re-forms and rank 0 (a survivor) sends them the step, the optimizer state and ``extra`` (e.g. a
  sampler cursor); DDP's re-wrap sends the model.

The membership lives in one long-lived ``TCPStore``, hosted by the process of a pod that is never
evicted (worker 0: volcano-elastic evicts the highest indexes first and never below
``minReplicas``); each generation of the group uses its own ``PrefixStore`` (keys are never re-used
after ``destroy_process_group``). Anything nobody planned (a SIGKILL, a lost node, the store host
gone) makes a collective or a store call raise: the process ends with an error and the job restarts
from its checkpoint, as without this module.

torch is imported when an :class:`InPlace` is made, never by importing the kit.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from .checkpoint import annotate_pod, pod_name
from .devices import collective_device
from .podinfo import LEFT, resize_request, target_workers

log = logging.getLogger("volcano_elastic_job")

STORE_ENV = "VOLCANO_ELASTIC_STORE"  # host:port of the long-lived store (else PET_RDZV_ENDPOINT, MASTER_ADDR)
STORE_POD_ENV = "VOLCANO_ELASTIC_STORE_POD"  # the pod that hosts it (else: the store host's first DNS label)
WORKERS_ENV = "VOLCANO_ELASTIC_WORKERS"  # the size of the first group (else target-workers, PET_NNODES' min)
ANNOUNCE_DIR_ENV = "VOLCANO_ELASTIC_ANNOUNCE_DIR"  # outside a cluster: write ``left`` as DIR/<pod>.left
DEFAULT_PORT = 29400
POLL = 0.02
WAIT_CHUNK = 5.0  # seconds of a store wait between two looks at whether the store is still there

Request = Callable[[], "tuple[int, int | None, bool] | None"]


class ResizeError(RuntimeError):
    """The group could not be formed or re-formed (bad configuration, a peer that never came)."""


def store_address(env: dict[str, str] | None = None) -> tuple[str, int]:
    """``host:port`` of the job's long-lived store: ``VOLCANO_ELASTIC_STORE``, else the rendezvous
    endpoint the training operator sets (``PET_RDZV_ENDPOINT``; no torchrun uses it in this mode),
    else ``MASTER_ADDR`` with port 29400."""
    env = dict(os.environ) if env is None else env
    value = env.get(STORE_ENV) or env.get("PET_RDZV_ENDPOINT")
    if not value:
        master = env.get("MASTER_ADDR")
        if not master:
            raise ResizeError(f"no store address: set {STORE_ENV}=host:port (or PET_RDZV_ENDPOINT, MASTER_ADDR)")
        return master, DEFAULT_PORT
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        return value, DEFAULT_PORT
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise ResizeError(f"{STORE_ENV}={value!r}: the port is not a number") from None


def hosts_store(host: str, pod: str, env: dict[str, str] | None = None) -> bool:
    """Whether this pod's process hosts the store: ``VOLCANO_ELASTIC_STORE_POD`` names it, else the
    pod whose name is the store host's first DNS label (``<job>-worker-0`` in
    ``<job>-worker-0:23456``)."""
    env = dict(os.environ) if env is None else env
    named = env.get(STORE_POD_ENV)
    if named:
        return named == pod
    return host.split(".")[0] == pod


def first_size(env: dict[str, str] | None = None, read_target: Callable[[], int | None] = target_workers) -> int:
    """The size of the group's first generation."""
    env = dict(os.environ) if env is None else env
    if env.get(WORKERS_ENV):
        return int(env[WORKERS_ENV])
    target = read_target()
    if target is not None:
        return target
    nnodes = env.get("PET_NNODES", "")
    if nnodes:
        return int(nnodes.split(":")[0])
    raise ResizeError(f"the first group's size is unknown: set {WORKERS_ENV}, or run under volcano-elastic "
                      "(target-workers) or the training operator (PET_NNODES)")


LEFT_RETRIES = (0.5, 1.0, 2.0, 4.0, 8.0)  # seconds between tries of ``left``: about 15 s in all


def announce_left(generation: int, pod: str | None = None,
                  retries: tuple[float, ...] = LEFT_RETRIES, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Tell the agent that this pod has left the group for event ``generation``: the pod's
    ``volcano-elastic.io/left`` annotation (through the API, as :func:`record_checkpoint`), or, where
    ``VOLCANO_ELASTIC_ANNOUNCE_DIR`` is set (local runs, tests), the file ``DIR/<pod>.left``.

    The PATCH is tried again after each of ``retries`` seconds while it fails (a busy API server, a
    timeout): the agent evicts the pod on ``left`` and otherwise only at its ``inPlaceLeaveSeconds``,
    so one lost PATCH would keep the waiting gang from the room for that whole time."""
    name = pod or pod_name()
    where = os.environ.get(ANNOUNCE_DIR_ENV)
    if where:
        path = os.path.join(where, f"{name}.left")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(str(generation))
        os.replace(path + ".tmp", path)
        return True
    for wait in retries:
        if annotate_pod({LEFT: str(generation)}, f"{LEFT}={generation}", pod=name):
            return True
        sleep(wait)
    return annotate_pod({LEFT: str(generation)}, f"{LEFT}={generation}", pod=name)


def _end_on_sigterm(signum: int, frame: Any) -> None:
    """A left rank's SIGTERM (its pod's eviction): end now, as SIGTERM's default action would."""
    logging.shutdown()
    os._exit(128 + signum)


def _arm_sigterm() -> bool:
    """Where SIGTERM has its default action, end on it by :func:`_end_on_sigterm` instead: a
    container's PID 1 (``python train.py`` as the pod's command) gets no default action from the
    kernel, and would otherwise wait out the pod's termination grace period for its SIGKILL. True
    when this process can wait for its SIGTERM (the main thread, SIGTERM not ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    handler = signal.getsignal(signal.SIGTERM)
    if handler in (signal.SIG_IGN, None):
        return False
    if handler == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _end_on_sigterm)
    return True


def decide(vector: list[int], world: int, applied: int) -> tuple[int, int, list[int], int] | None:
    """What the agreed vector says (see :meth:`InPlace._check`): ``(generation, target, leaving ranks,
    joiners to admit)`` when every rank saw the same new event and it can be done now, else None."""
    leaving = [r for r in range(world) if vector[r]]
    gen_max, gen_min = vector[world], -vector[world + 1]
    t_max, t_min, ready = vector[world + 2], -vector[world + 3], vector[world + 4]
    if gen_max != gen_min or gen_max <= applied or t_max != t_min:
        return None  # no new event, or not every pod has seen it yet
    target = t_max if t_max > 0 else world
    survivors = world - len(leaving)
    if survivors > target or survivors < 1 or 0 in leaving:
        return None  # some leavers have not seen their notice yet (or the store host would leave)
    if survivors + ready < target:
        return None  # the newcomers are still warming up
    return gen_max, target, leaving, target - survivors


def split_tensors(obj: Any, tensor_type: Any, out: list[Any]) -> Any:
    """``obj`` with each tensor replaced by a placeholder (appended to ``out``), to be
    pickled and sent apart from the tensors."""
    if isinstance(obj, tensor_type):
        out.append(obj)
        return {"__tensor__": len(out) - 1, "shape": list(obj.shape), "dtype": str(obj.dtype).split(".")[-1]}
    if isinstance(obj, dict):
        return {k: split_tensors(v, tensor_type, out) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(split_tensors(v, tensor_type, out) for v in obj)
    return obj


def join_tensors(obj: Any, tensors: list[Any]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj and "shape" in obj:
            return tensors[obj["__tensor__"]]
        return {k: join_tensors(v, tensors) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(join_tensors(v, tensors) for v in obj)
    return obj


def placeholders(obj: Any) -> list[dict[str, Any]]:
    """The placeholders of :func:`split_tensors`, in tensor order."""
    found: list[dict[str, Any]] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            if "__tensor__" in o and "shape" in o:
                found.append(o)
                return
            for v in o.values():
                walk(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)

    walk(obj)
    return sorted(found, key=lambda p: int(p["__tensor__"]))


class InPlace:
    """The group of a job that resizes in place. Make it after building the model and optimizer::

        job = InPlace(model, optimizer, backend="gloo")   # joins (a newcomer gets the state here)
        for step in job.steps(total):                      # re-forms the group between steps
            x, y = my_batch(step, job.rank, job.world)     # shard by the current rank and size
            loss = loss_fn(job.ddp(x), y); optimizer.zero_grad(); loss.backward(); optimizer.step()

    ``job.ddp`` is the model wrapped in DistributedDataParallel for the current group (``ddp=False``:
    the bare model, state sent by broadcast). ``every``: steps between looks (one all-reduce of
    ``world + 5`` ints). ``extra``: a dict of picklable values that newcomers get (sampler cursor,
    scheduler state); ``on_resize(job)`` runs on every member after each re-forming (rescale the
    learning rate, rebuild samplers). A leaving rank's ``steps()`` ends after it left: it waits for
    its eviction (SIGTERM) up to ``leave_grace`` seconds, and ``job.left`` is True.
    ``start_step``: where a fresh group starts (the checkpoint's step); newcomers ignore it.
    ``join_timeout``: how long a process waits to reach the store, to be admitted or for the first
    group to fill (then :class:`ResizeError`); ``timeout``: the process group's (gloo, NCCL).
    ``verify``: after each re-forming, check with one all-reduce that every rank holds the same
    model and optimizer state (:meth:`fingerprint`), else raise :class:`ResizeError`."""

    def __init__(self, model: Any, optimizer: Any = None, *, backend: str = "gloo", every: int = 5,
                 extra: dict[str, Any] | None = None, start_step: int = 0, ddp: bool = True,
                 on_resize: Callable[[InPlace], None] | None = None, timeout: float = 60.0,
                 join_timeout: float = 600.0, leave_grace: float = 60.0, device: Any = None,
                 ddp_kwargs: dict[str, Any] | None = None, request: Request = resize_request,
                 announce: Callable[[int], bool] = announce_left, env: dict[str, str] | None = None,
                 verify: bool = True) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        self.torch: Any = importlib.import_module("torch")
        self.dist: Any = importlib.import_module("torch.distributed")
        self.model, self.optimizer, self.backend, self.every = model, optimizer, backend, every
        self.extra: dict[str, Any] = dict(extra or {})
        self.use_ddp, self.ddp_kwargs, self.device = ddp, dict(ddp_kwargs or {}), device
        self.on_resize, self.timeout, self.join_timeout = on_resize, timeout, join_timeout
        self.leave_grace, self.request, self.announce, self.verify = leave_grace, request, announce, verify
        self.member = pod_name() if env is None or "POD_NAME" not in env else env["POD_NAME"]
        self.step = start_step
        self.left = False
        self.generation = 0  # the group's generation (0: the first group)
        self.applied = 0  # the agent's last in-place event this group has carried out
        self.events: list[dict[str, Any]] = []  # one per re-forming: what and how long (seconds)
        self.collectives = 0
        self._checked = -1
        self._admitted = 0
        self._ddp: Any = None
        self._pending_admits: list[tuple[str, int]] = []
        self.members: list[str] = []
        host, port = store_address(env)
        self.is_host = hosts_store(host, self.member, env)
        self.store: Any = self.dist.TCPStore(host, port, None, self.is_host, timedelta(seconds=join_timeout),
                                             wait_for_workers=False)
        if self.is_host:
            self._form_first(first_size(env))
        else:
            self._join()

    # ------------------------------------------------------------------ what the loop sees
    @property
    def rank(self) -> int:
        return int(self.members.index(self.member))

    @property
    def world(self) -> int:
        return len(self.members)

    @property
    def ddp(self) -> Any:
        """The model as the training step should call it: DDP on the current group, or the model."""
        return self._ddp if self._ddp is not None else self.model

    def steps(self, total: int) -> Iterator[int]:
        """The steps from the current one to ``total``; between two, the group may re-form (same
        step, new size). Ends early on a rank that left."""
        while self.step < total:
            if self.step != self._checked and self.step % self.every == 0:
                self._checked = self.step
                self._check()
                if self.left:
                    return
            yield self.step
            self.step += 1

    # ------------------------------------------------------------------ forming the group
    def _record(self, generation: int) -> dict[str, Any]:
        key = f"gen{generation}"
        self._wait_key(key, self.join_timeout)
        record: dict[str, Any] = json.loads(self.store.get(key).decode())
        return record

    def _wait_key(self, key: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            chunk = min(WAIT_CHUNK, max(0.01, deadline - time.monotonic()))
            try:
                self.store.wait([key], timedelta(seconds=chunk))  # answers as soon as the key is set
                return
            except RuntimeError as exc:  # "Wait timeout" (torch 2.x: DistStoreError), or the store is gone
                if time.monotonic() >= deadline or "timeout" not in str(exc).lower():
                    raise ResizeError(f"volcano-elastic: {key!r} did not appear in the store within "
                                      f"{timeout:.0f} s: {exc}") from exc
            try:  # a store whose host died may only time out (torch 2.x): ask it something
                self.store.add("joiners", 0)
            except RuntimeError as exc:
                raise ResizeError(f"volcano-elastic: the store is gone while waiting for {key!r}: {exc}") from exc

    def _form_first(self, size: int) -> None:
        """On the store host: wait for ``size - 1`` other processes, then make generation 0."""
        deadline = time.monotonic() + self.join_timeout
        while int(self.store.add("joiners", 0)) < size - 1:
            if time.monotonic() > deadline:
                raise ResizeError(f"volcano-elastic: {size} processes did not join within {self.join_timeout:.0f} s")
            time.sleep(POLL)
        names = self._admit(size - 1)
        self.members = [self.member, *names]
        self._publish(0, {"members": self.members, "applied": 0, "step": self.step, "fresh": True})
        self._init_group(0)
        self._rewrap()

    def _join(self) -> None:
        """Register (after the caller built its model: the warm-up is done) and wait to be admitted."""
        seq = int(self.store.add("joiners", 1))
        self.store.set(f"joiner/{seq}", self.member)
        key = f"admit/{self.member}/{seq}"
        self._wait_key(key, self.join_timeout)
        generation = int(self.store.get(key).decode())
        record = self._record(generation)
        self.members = list(record["members"])
        self.applied = int(record["applied"])
        self._init_group(generation)
        if not record.get("fresh"):
            self._sync_state()
            self._checked = self.step  # the survivors looked at this step already
            if self.verify:
                self._verify()
        else:
            self._rewrap()
        if self.on_resize is not None:
            self.on_resize(self)
        log.info("volcano-elastic: joined generation %d as rank %d of %d at step %d",
                 generation, self.rank, self.world, self.step)

    def _admit(self, count: int) -> list[str]:
        """On the store host: the next ``count`` registered processes (told which generation to join
        by :meth:`_publish`)."""
        names = []
        for seq in range(self._admitted + 1, self._admitted + count + 1):
            self._wait_key(f"joiner/{seq}", self.timeout)
            names.append(self.store.get(f"joiner/{seq}").decode())
        self._pending_admits = [(names[i], self._admitted + 1 + i) for i in range(count)]
        self._admitted += count
        return names

    def _publish(self, generation: int, record: dict[str, Any]) -> None:
        self.store.set(f"gen{generation}", json.dumps(record))
        for name, seq in self._pending_admits:
            self.store.set(f"admit/{name}/{seq}", str(generation))
        self._pending_admits = []

    def _init_group(self, generation: int) -> None:
        self.generation = generation
        prefixed = self.dist.PrefixStore(f"gen{generation}/", self.store)
        self.dist.init_process_group(self.backend, store=prefixed, rank=self.rank, world_size=self.world,
                                     timeout=timedelta(seconds=self.timeout))

    def _rewrap(self) -> None:
        if not self.use_ddp:
            self._ddp = None
            return
        nn_parallel: Any = importlib.import_module("torch.nn.parallel")
        self._ddp = nn_parallel.DistributedDataParallel(self.model, **self.ddp_kwargs)  # syncs from rank 0

    # ------------------------------------------------------------------ resizing
    def _check(self) -> None:
        """The step boundary: one all-reduce (max) of [leaving flag per rank, generation, -generation,
        target, -target, ready newcomers]; every rank gets the same vector and decides the same."""
        world, rank = self.world, self.rank
        seen = self.request()
        generation, target, leaving = seen if seen is not None else (self.applied, None, False)
        vector = [0] * (world + 5)
        vector[rank] = 1 if leaving and generation > self.applied else 0
        vector[world], vector[world + 1] = generation, -generation
        t = target or 0
        vector[world + 2], vector[world + 3] = t, -t
        if self.is_host:
            vector[world + 4] = int(self.store.add("joiners", 0)) - self._admitted
        tensor = self.torch.tensor(vector, dtype=self.torch.int64, device=self._collective_device())
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.MAX)
        self.collectives += 1
        agreed = [int(v) for v in tensor.tolist()]
        decision = decide(agreed, world, self.applied)
        if decision is not None:
            self._resize(*decision)

    def _collective_device(self) -> Any:
        if self.device is not None:
            return self.device
        return collective_device(self.torch, self.backend) or "cpu"  # devices.py

    def _resize(self, event: int, target: int, leaving: list[int], newcomers: int) -> None:
        started = time.monotonic()
        old_world, next_gen = self.world, self.generation + 1
        self.applied = event
        if not leaving and newcomers == 0:
            return  # nothing changes (e.g. an event for pods of another kind)
        if self.rank in leaving:
            self._leave(event)
            return
        if self.is_host:
            names = self._admit(newcomers)
            survivors = [m for i, m in enumerate(self.members) if i not in leaving]
            self._publish(next_gen, {"members": [*survivors, *names], "applied": event, "step": self.step,
                                     "fresh": False})
        record = self._record(next_gen)
        self._ddp = None
        self.dist.destroy_process_group()
        self.members = list(record["members"])
        self._init_group(next_gen)
        formed = time.monotonic()
        if newcomers:
            self._sync_state()
        else:
            self._rewrap()
        self._checked = self.step
        consistent = self._verify() if self.verify else None
        if self.on_resize is not None:
            self.on_resize(self)
        done = time.monotonic()
        self.events.append({"event": event, "step": self.step, "from": old_world, "to": self.world,
                            "generation": next_gen, "newcomers": newcomers, "consistent": consistent,
                            "reformSeconds": round(formed - started, 4), "seconds": round(done - started, 4)})
        log.info("volcano-elastic: resized in place %d -> %d at step %d in %.2f s (event %d)",
                 old_world, self.world, self.step, done - started, event)

    def _leave(self, event: int) -> None:
        self._ddp = None
        self.dist.destroy_process_group()
        self.left = True
        _arm_sigterm()  # before `left` is said: the eviction may follow at once, or come while it is retried
        self.announce(event)
        log.info("volcano-elastic: left the group at step %d (event %d); waiting for the eviction", self.step, event)
        self._hold()

    def _hold(self) -> None:
        """Wait for the eviction's SIGTERM up to the grace, ending on it with 143 as its default action
        would (:func:`_arm_sigterm`)."""
        if not _arm_sigterm():
            return
        deadline = time.monotonic() + self.leave_grace
        while time.monotonic() < deadline:
            time.sleep(0.1)

    def _sync_state(self) -> None:
        """Rank 0 sends what a newcomer needs: step, applied event, ``extra``, the optimizer's
        state (skeleton pickled, then each tensor); the model by DDP's re-wrap
        (or a broadcast of each tensor without DDP)."""
        torch, dist = self.torch, self.dist
        tensors: list[Any] = []
        payload: Any = None
        if self.rank == 0:
            opt = (split_tensors(self.optimizer.state_dict(), torch.Tensor, tensors)
                   if self.optimizer is not None else None)
            payload = {"step": self.step, "applied": self.applied, "extra": self.extra, "opt": opt}
        payload = self._broadcast_object(payload)
        if self.rank != 0:
            device = self._collective_device()
            tensors = [torch.empty(p["shape"], dtype=getattr(torch, p["dtype"]), device=device)
                       for p in placeholders(payload["opt"])]
        for t in tensors:
            dist.broadcast(t, src=0)
        if not self.use_ddp:
            for t in self.model.state_dict().values():
                dist.broadcast(t, src=0)
        if self.rank != 0:
            self.step = int(payload["step"])
            self.applied = int(payload["applied"])
            self.extra.update(payload["extra"])
            if self.optimizer is not None and payload["opt"] is not None:
                self.optimizer.load_state_dict(join_tensors(payload["opt"], tensors))
        self._rewrap()

    def _broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank: pickled, its length then its bytes broadcast as tensors
        (``broadcast_object_list`` needs numpy on torch 2.x, which torch does not require)."""
        torch, dist = self.torch, self.dist
        device = self._collective_device()
        data = pickle.dumps(obj) if self.rank == 0 else b""
        size = torch.tensor([len(data)], dtype=torch.int64, device=device)
        dist.broadcast(size, src=0)
        if self.rank == 0:
            buf = torch.tensor(list(data), dtype=torch.uint8, device=device)
        else:
            buf = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
        dist.broadcast(buf, src=0)
        return obj if self.rank == 0 else pickle.loads(bytes(buf.cpu().tolist()))  # from rank 0 of this job

    def fingerprint(self) -> float:
        """A sum over the model's state and the optimizer's state tensors: equal on every rank when
        they hold the same state (the same tensors summed in the same order)."""
        total = 0.0
        tensors: list[Any] = list(self.model.state_dict().values())
        if self.optimizer is not None:
            split_tensors(self.optimizer.state_dict()["state"], self.torch.Tensor, tensors)
        for t in tensors:
            total += float(t.detach().double().sum().item())
        return total

    def _verify(self) -> bool:
        """After a re-forming: do all ranks hold the same model and optimizer state? (Two floats
        all-reduced; a mismatch raises ResizeError: training on would diverge silently.)"""
        fp = self.fingerprint()
        t = self.torch.tensor([fp, -fp], dtype=self.torch.float64, device=self._collective_device())
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        high, low = float(t[0].item()), -float(t[1].item())
        if high != low:
            raise ResizeError(f"volcano-elastic: the ranks hold different states after re-forming "
                              f"(fingerprints {low!r} to {high!r})")
        return True

    def close(self) -> None:
        """Leave torch.distributed at the end of training (every member, after its last step)."""
        self._ddp = None
        if self.dist.is_initialized():
            self.dist.destroy_process_group()
