"""The kit's rendezvous restarts the survivors as soon as a member left the round (issue 39: the
torch 2.x scale-down wait), and leaves the rendezvous once, and not a closed one."""

from __future__ import annotations

import enum
import logging
import sys
import types
from typing import Any

import pytest
from volcano_elastic_job import rendezvous


def state(round_: int, participants: set[str], complete: bool = True, closed: bool = False) -> Any:
    return types.SimpleNamespace(round=round_, participants={p: i for i, p in enumerate(sorted(participants))},
                                 complete=complete, closed=closed, wait_list=set())


class Handler:
    """The parts of torch's DynamicRendezvousHandler the kit touches: after `next_rendezvous` this node
    is in round `round_` with `members`; `num_nodes_waiting` answers the wait list's size."""

    def __init__(self, members: set[str], round_: int = 1) -> None:
        self._state_holder = types.SimpleNamespace(state=state(round_, members), sync=lambda: None)
        self._settings = types.SimpleNamespace(min_nodes=2, max_nodes=4)
        self.members, self.round = members, round_
        self.waiting_calls = 0

    def next_rendezvous(self) -> str:
        self._state_holder.state = state(self.round, self.members)
        return "info"

    def num_nodes_waiting(self) -> int:
        self.waiting_calls += 1
        return len(self._state_holder.state.wait_list)


def test_departed_counts_members_gone_from_the_round_joined() -> None:
    members = frozenset({"a", "b", "c", "d"})
    assert rendezvous.departed(members, 3, state(3, {"a", "b", "c"})) == 1
    assert rendezvous.departed(members, 3, state(3, set(members))) == 0
    assert rendezvous.departed(members, 3, state(4, {"a"}, complete=False)) == 0  # another round
    assert rendezvous.departed(members, 3, state(3, {"a"}, closed=True)) == 0  # the job is ending
    assert rendezvous.departed(members, 3, state(3, {"a"}, complete=False)) == 0
    assert rendezvous.departed(frozenset(), -1, state(3, {"a"})) == 0  # never joined


def test_a_member_that_left_makes_the_agent_restart_its_workers(caplog: pytest.LogCaptureFixture,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(rendezvous.DEPARTURES_ENV, raising=False)
    h = Handler({"a", "b", "c", "d"})
    assert rendezvous.watch_departures(h)
    assert h.num_nodes_waiting() == 0  # before any round: nothing to compare with
    assert h.next_rendezvous() == "info"
    assert h.num_nodes_waiting() == 0
    h._state_holder.state.participants.pop("d")  # d's agent was evicted and left
    with caplog.at_level(logging.INFO, logger="volcano_elastic_job"):
        assert h.num_nodes_waiting() == 1
        assert h.num_nodes_waiting() == 1  # every look, until this node re-joins
    assert sum("left it: restarting the workers now" in r.message for r in caplog.records) == 1  # said once
    h.members, h.round = {"a", "b", "c"}, 2
    h.next_rendezvous()
    assert h.num_nodes_waiting() == 0  # the new round has everybody it started with
    h._state_holder.state.wait_list.add("e")
    assert h.num_nodes_waiting() == 1  # torch's own answer (a node waits to join) comes first


def test_departures_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rendezvous.DEPARTURES_ENV, "off")
    h = Handler({"a", "b"})
    assert not rendezvous.watch_departures(h)
    h.next_rendezvous()
    h._state_holder.state.participants.pop("b")
    assert h.num_nodes_waiting() == 0


class Actions(enum.Enum):  # torch 2.x's _Action (1.13's has no REMOVE_FROM_REDUNDANCY_LIST)
    REMOVE_FROM_PARTICIPANTS = 1
    REMOVE_FROM_WAIT_LIST = 2
    REMOVE_FROM_REDUNDANCY_LIST = 3
    ERROR_TIMEOUT = 4
    FINISH = 5


def test_leaving_takes_the_node_out_of_the_wait_list_too() -> None:
    """An agent whose workers failed waits for the next round in the wait list; evicted there, it
    must leave it, or every other agent sees a node waiting and restarts its workers until that
    node's keep-alive expires. torch's exit op only looks at the participants."""
    import time

    op = rendezvous.leave_op(Actions)
    s = types.SimpleNamespace(participants={"me": 0, "b": 1}, wait_list=set(), redundancy_list=set())

    def ctx() -> Any:
        return types.SimpleNamespace(node="me", state=s)

    later = time.monotonic() + 60
    assert op(ctx(), later) is Actions.REMOVE_FROM_PARTICIPANTS
    s.participants.pop("me")
    s.wait_list.add("me")
    assert op(ctx(), later) is Actions.REMOVE_FROM_WAIT_LIST
    s.wait_list.clear()
    s.redundancy_list.add("me")
    assert op(ctx(), later) is Actions.REMOVE_FROM_REDUNDANCY_LIST
    s.redundancy_list.clear()
    assert op(ctx(), later) is Actions.FINISH
    s.wait_list.add("me")
    assert op(ctx(), time.monotonic() - 1) is Actions.ERROR_TIMEOUT


def test_leave_leaves_each_handler_once_and_never_a_closed_rendezvous(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    class Executor:
        def __init__(self, name: str) -> None:
            self.name = name

        def run(self, op: Any, deadline: float) -> None:
            ran.append(self.name)

    def handler(name: str, closed: bool) -> Any:
        return types.SimpleNamespace(_state_holder=types.SimpleNamespace(state=state(1, {"a"}, closed=closed)),
                                     _stop_heartbeats=lambda: None, _op_executor=Executor(name))

    fake = types.ModuleType("torch.distributed.elastic.rendezvous.dynamic_rendezvous")
    fake._Action = Actions  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed.elastic.rendezvous.dynamic_rendezvous", fake)
    monkeypatch.setattr(rendezvous, "_handlers", [handler("open", False), handler("closed", True)])
    assert rendezvous.leave() == 1
    assert ran == ["open"]
    assert rendezvous.leave() == 0  # the launcher's leave on SIGTERM, then the exit hook: once
    assert ran == ["open"]
