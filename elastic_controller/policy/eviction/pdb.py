"""A tenant's PodDisruptionBudget over its elastic workers (issue 36, T13): honoured first, never
a reason for another department's gang to wait.

Elastic workers above their job's min run on borrowed capacity: the job's owner agreed that they
give it back to a starving gang (that is what ``elasticPolicy`` means here). A PDB selecting them
(``maxUnavailable: 0``, ``minAvailable`` = all: a common, innocent habit) makes the Eviction API
refuse every one, so without this rule the gang waits forever and the tenant keeps what it borrowed.

The rule, as kube-scheduler's preemption treats PDBs (best effort, violated when nothing else
makes room):

1. A pod whose eviction a PDB refused lately is no victim (``Planner(refused=...)``, counted as
   "PDB refused eviction"): every other victim is preferred, and a PDB that allows the eviction
   (``maxUnavailable: 1``) is honoured, as the Eviction API is always tried first.
2. When a starving gang would still wait with such pods among its excluded candidates, that gang
   (and only the gangs that waited so) is planned again with them as candidates, on what every other
   gang's plan leaves (``past_pdb_needed``, ``cycle._past_pdb``); the victims among them become
   ``PastPdbEviction``: the writer removes them by a DELETE with the pod's uid as precondition (the
   Eviction API would refuse again), immediately (no notice: the notice's own eviction would be
   refused), with a Warning Event ``DisruptionBudgetPassed`` and the eviction metric's reason
   ``pdb-passed``.

Every other gang keeps its first plan (its victims taken first), so a gang that had other victims
never takes a pod a PDB protects.

What a PDB still holds: every pod the planner never takes (masters, a job's min workers, rigid
jobs, non-PyTorchJob pods), and every elastic worker whenever another victim makes room. The
fairness scale-down never passes a PDB (no gang starves there). The controller may DELETE only a
pod it claimed for a gang first (``evicted-for``), bounded by the ValidatingAdmissionPolicy
``volcano-elastic-controller-pod-deletes``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..decisions import Eviction, GangDecision
from .admissibility import PDB_REFUSED

PAST_PDB_NOTE = ("; a PodDisruptionBudget refused its eviction and no other victim makes room: removed past "
                 "the PDB (elastic workers above min are borrowed)")


@dataclass(frozen=True, slots=True)
class PastPdbEviction(Eviction):
    """A victim removed past the PodDisruptionBudget that refused its eviction (a subclass, not a
    field: every other plan stays the same, field for field)."""

    @property
    def past_pdb(self) -> bool:
        return True

    def to_json(self) -> dict[str, Any]:
        return {**Eviction.to_json(self), "pastPdb": True}


def past_pdb_needed(decisions: Iterable[GangDecision], refused: frozenset[str]) -> bool:
    """Whether a starving gang waits with pods a PDB protected among its excluded candidates."""
    return bool(refused) and any(d.decision == "wait" and PDB_REFUSED in d.reason for d in decisions)


def mark_past_pdb(evictions: Iterable[Eviction], refused: frozenset[str]) -> list[Eviction]:
    """``evictions`` with each victim in ``refused`` made a ``PastPdbEviction`` (its reason says why)."""
    out: list[Eviction] = []
    for e in evictions:
        if e.pod in refused and not e.past_pdb:
            e = PastPdbEviction(e.pod, e.node, e.job, e.queue, e.for_gang, e.reason + PAST_PDB_NOTE, e.uid, e.kind)
        out.append(e)
    return out
