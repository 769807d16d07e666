"""A torchrun rendezvous that stops waiting for workers that will not come.

torchrun's c10d rendezvous, once ``min`` nodes have joined a round, waits ``last_call_timeout``
(30 s by default) for more, up to ``max``. volcano-elastic knows how many workers the job will have
after each of its decisions and writes it on every pod of the job
(``volcano-elastic.io/target-workers``, read here from the downward-API annotations file). This
backend is torch's own c10d rendezvous with one change: a round completes as soon as that many
nodes have joined. Without a target (no annotation, a job outside volcano-elastic) it is exactly
c10d. With a target that never arrives (a pod failed to start) it waits the usual last call, so it
is never slower than c10d.

And one more thing on the way out: an agent stopped by a signal (an eviction's SIGTERM) leaves the
rendezvous (:func:`leave`, called by ``python -m volcano_elastic_job.run``), so the survivors do not
wait for its keep-alive to expire (3 x 5 s) before their next round.

The survivors then restart as soon as they see that a member left (:func:`watch_departures`): torch's
agent restarts its workers only once one of them has exited, and a worker whose collective failed
on a dead peer takes 8-9 s to exit on torch 2.x (interpreter shutdown with a gloo group; the error
itself comes in 0.1 s). The agent's look for waiting nodes (every monitor interval) also counts the
members that left the round it joined, and torch's agent restarts its workers at once.
``VOLCANO_ELASTIC_DEPARTURES=off`` turns this off.

It wraps whatever handler torch's c10d creator returns and touches three private names of
``torch.distributed.elastic.rendezvous.dynamic_rendezvous`` (the handler's ``_state_holder``,
``_op_executor`` and ``_Action``), the same in torch 1.13 and 2.x; where they are missing
it logs once and runs plain c10d.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from .podinfo import target_workers

log = logging.getLogger("volcano_elastic_job")

BACKEND = "volcano-c10d"
_handlers: list[Any] = []  # the handlers this process made (for leave())
_exit_hook: list[Any] = []  # the atexit hook, once registered


def round_target(target: int | None, min_nodes: int, max_nodes: int) -> int | None:
    """The number of nodes at which a round may complete: the announced target within
    [min, max]; None without a target."""
    if target is None:
        return None
    return max(min_nodes, min(target, max_nodes))


def complete_at_target(state: Any, min_nodes: int, max_nodes: int, target: int | None) -> bool:
    """Move a round's last-call deadline to now when ``target`` nodes have joined it, so that
    torch's own join step completes the round at its next look. True when it did."""
    want = round_target(target, min_nodes, max_nodes)
    deadline = getattr(state, "deadline", None)
    if want is None or deadline is None or state.complete or state.closed:
        return False
    if len(state.participants) < want:
        return False
    now = datetime.now(timezone.utc)
    if deadline.tzinfo is None:  # torch < 2.4 keeps naive UTC times
        now = now.replace(tzinfo=None)
    if deadline <= now:
        return False
    state.deadline = now - timedelta(milliseconds=1)
    return True


def wrap(handler: Any, read_target: Callable[[], int | None] = target_workers) -> Any:
    """Make ``handler`` (a c10d DynamicRendezvousHandler) complete rounds at the target."""
    holder = getattr(handler, "_state_holder", None)
    settings = getattr(handler, "_settings", None)
    if holder is None or settings is None or not hasattr(holder, "sync"):
        log.warning("volcano-elastic: this torch's rendezvous handler (%s) has no state holder; "
                    "running plain c10d", type(handler).__name__)
        return handler
    sync = holder.sync
    min_nodes, max_nodes = int(settings.min_nodes), int(settings.max_nodes)

    def sync_then_check() -> Any:
        result = sync()
        target = read_target()
        if complete_at_target(holder.state, min_nodes, max_nodes, target):
            log.info("volcano-elastic: %d of %d nodes joined, the announced target: completing the round now",
                     len(holder.state.participants), target)
        return result

    holder.sync = sync_then_check
    watch_departures(handler)
    _handlers.append(handler)
    return handler


DEPARTURES_ENV = "VOLCANO_ELASTIC_DEPARTURES"  # "off": a survivor waits for its workers to fail, as torch does


def departed(members: frozenset[Any], joined_round: int, state: Any) -> int:
    """How many of the round's ``members`` (as this node joined it) have left it since: a member that
    left a completed round (its agent stopped and left, or its keep-alive expired). 0 when the round
    is no longer the one joined, not complete, or closed (the job is ending)."""
    if not members or state.round != joined_round or not state.complete or state.closed:
        return 0
    return len(members - set(state.participants))


def watch_departures(handler: Any) -> bool:
    """Make ``handler.num_nodes_waiting()`` (which torch's agent calls every monitor interval while its
    workers are healthy, and on a non-zero answer restarts them without spending a restart) also
    count the members that left the round this node last joined. True when it did."""
    if os.environ.get(DEPARTURES_ENV) == "off":
        return False
    holder = getattr(handler, "_state_holder", None)
    next_rendezvous = getattr(handler, "next_rendezvous", None)
    waiting = getattr(handler, "num_nodes_waiting", None)
    if holder is None or next_rendezvous is None or waiting is None:
        return False
    joined: dict[str, Any] = {"round": -1, "members": frozenset()}
    told: set[int] = set()

    def next_and_remember(*args: Any, **kwargs: Any) -> Any:
        result = next_rendezvous(*args, **kwargs)
        state = holder.state
        joined["round"], joined["members"] = state.round, frozenset(state.participants)
        return result

    def waiting_or_departed() -> int:
        n = int(waiting())
        if n:
            return n
        gone = departed(joined["members"], joined["round"], holder.state)
        if gone and joined["round"] not in told:
            told.add(joined["round"])
            log.info("volcano-elastic: %d of the %d nodes of round %d left it: restarting the workers now",
                     gone, len(joined["members"]), joined["round"])
        return gone

    handler.next_rendezvous = next_and_remember
    handler.num_nodes_waiting = waiting_or_departed
    return True


def create_handler(params: Any) -> Any:
    """A rendezvous handler creator for torch's registry (``RendezvousParameters`` -> handler)."""
    if not _exit_hook:
        _exit_hook.append(_leave_at_exit)
        atexit.register(_leave_at_exit)
    registry: Any = importlib.import_module("torch.distributed.elastic.rendezvous.registry")
    handler = registry._create_c10d_handler(params)
    name = str(getattr(params, "backend", "c10d"))
    if name != "c10d":  # torch's registry checks that the handler says the backend it was asked for
        if hasattr(handler, "_backend_name"):
            handler._backend_name = name
        else:
            handler.get_backend = lambda: name
    return wrap(handler)


def handler_creator() -> Callable[[Any], Any]:
    """The ``torchrun.handlers`` entry point: torch (2.4+) calls it with no argument and registers
    what it returns (the creator) under the entry point's name, ``volcano-c10d``."""
    return create_handler


def register(replace_c10d: bool = True) -> None:
    """Register ``volcano-c10d`` in torch's rendezvous registry and, with ``replace_c10d``, make
    ``c10d`` (what the training operator sets) use it too, in this process only."""
    api: Any = importlib.import_module("torch.distributed.elastic.rendezvous")
    registry = api.rendezvous_handler_registry
    creators = getattr(registry, "_registry", None)
    if isinstance(creators, dict):
        creators[BACKEND] = create_handler
        if replace_c10d:
            creators["c10d"] = create_handler
    else:
        registry.register(BACKEND, create_handler)
        log.warning("volcano-elastic: cannot replace this torch's c10d rendezvous; use --rdzv-backend=%s",
                    BACKEND)


def leave(timeout: float = 5.0) -> int:
    """Remove this process's nodes from their rendezvous (an agent stopped by a signal), so that
    the others go on without waiting for its keep-alive to expire. Returns how many it left. A
    closed rendezvous (the job ended) is left alone; each handler is left once."""
    if not _handlers:
        return 0
    dyn: Any = importlib.import_module("torch.distributed.elastic.rendezvous.dynamic_rendezvous")
    left = 0
    while _handlers:
        handler = _handlers.pop()
        if getattr(getattr(getattr(handler, "_state_holder", None), "state", None), "closed", False):
            continue
        try:
            handler._stop_heartbeats()
            handler._op_executor.run(leave_op(dyn._Action), time.monotonic() + timeout)
            left += 1
        except Exception as exc:  # the store host may be gone already: its keep-alive expires instead
            log.warning("volcano-elastic: could not leave the rendezvous: %r", exc)
    return left


def leave_op(actions: Any) -> Callable[[Any, float], Any]:
    """A rendezvous operation (torch's ``(context, deadline) -> action``) that takes this node out of
    the rendezvous wherever it is: the participants (what torch's own exit op does), and also the
    wait list (and torch 2.x's redundancy list). An agent whose workers failed joins the next round's
    wait list; stopped there by its eviction, torch's exit op would leave it in the list, and every
    other agent would see a node waiting to join and restart its workers, again and again, until
    that node's keep-alive expired (measured on torch 1.13: 7 restarts in 15 s)."""
    redundancy = getattr(actions, "REMOVE_FROM_REDUNDANCY_LIST", None)

    def op(ctx: Any, deadline: float) -> Any:
        state = ctx.state
        if time.monotonic() > deadline:
            return actions.ERROR_TIMEOUT
        if ctx.node in state.participants:
            return actions.REMOVE_FROM_PARTICIPANTS
        if ctx.node in state.wait_list:
            return actions.REMOVE_FROM_WAIT_LIST
        if redundancy is not None and ctx.node in getattr(state, "redundancy_list", ()):
            return redundancy
        return actions.FINISH

    return op


def _leave_at_exit() -> None:
    """``torchrun --rdzv-backend=volcano-c10d`` (no launcher to catch the signal): an agent stopped by
    an eviction's SIGTERM ends with torch's SignalException; on the way out, leave as the launcher
    would (a job that ended has closed its rendezvous: nothing to leave then)."""
    if leave():
        log.warning("volcano-elastic: the agent is ending; left the rendezvous")
