"""Fault injection for tests (``VOLCANO_ELASTIC_FAULT``): the named points between the writes of every
write path (``FAULT_STEPS``), parsed from the environment (``parse_faults``); ``Executor.fault`` sleeps,
raises ``InjectedFault`` or exits at them. docs/failure-model.md, "Fault injection"."""

from __future__ import annotations

FAULT_ENV = "VOLCANO_ELASTIC_FAULT"  # test hook: "STEP=sleep:SECONDS", "STEP=raise" or "STEP=exit" (comma-separated)
# Every fault point, in one place: one between each pair of writes on each write path. A write path
# without its points fails tests/unit/test_fault_points.py (each point is exercised there, and every
# ``ex.fault``/``fault`` call must name one of these).
FAULT_STEPS = (
    # the immediate eviction path (evictions.py): victims stamped, jobs stamped, each eviction
    "victims-stamped", "jobs-stamped", "evicted-one",
    # any scale stamp (Executor.stamp): the PodGroup written, its copy on the PyTorchJob not yet
    "podgroup-stamped",
    # the notice path (notices.give_notice, notice.Notices.give): jobs stamped, each victim noticed
    "notice-jobs-stamped", "noticed-one",
    # acting on notices (notice.Notices.act): each notice withdrawn, each due victim evicted
    "withdrawn-one", "due-evicted-one",
    # scale-up (gates.py): job stamped, each gate lifted
    "gates-stamped", "gate-lifted-one",
    # an undo (Executor.undo): each victim unstamped, each cooldown stamp restored
    "unstamped-one", "restored-one",
)


class InjectedFault(BaseException):
    """Raised at a named step by the ``VOLCANO_ELASTIC_FAULT`` test hook (a crash: nothing catches it)."""


def parse_faults(text: str | None) -> dict[str, str]:
    """``victims-stamped=exit,evicted-one=sleep:20`` -> {step: action}; unknown steps are an error."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        step, _, action = part.strip().partition("=")
        if step not in FAULT_STEPS or not (action in ("raise", "exit") or action.startswith("sleep:")):
            raise ValueError(f"{FAULT_ENV}: bad entry {part!r} (steps: {', '.join(FAULT_STEPS)}; "
                             "actions: raise, exit, sleep:SECONDS)")
        out[step] = action
    return out
