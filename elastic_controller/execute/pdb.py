"""The writer of a victim removed past the PodDisruptionBudget that refused its eviction (issue 36,
T13; the rule is ``policy/eviction/pdb.py``): a DELETE with the pod's uid as precondition instead of
the Eviction API (which would refuse again), a Warning Event ``DisruptionBudgetPassed`` on the pod
and the eviction metric with reason ``pdb-passed`` (``Executor.evicted``, once per pod). Every other
victim goes through the Eviction API."""

from __future__ import annotations

from ..kube.api import evicted_pod_ref
from ..kube.errors import KubeError
from ..kube.resources import PODS
from ..policy.decisions import Eviction
from .executor import Executor, log, split


def remove(ex: Executor, e: Eviction, *, dry_run: bool = False) -> None:
    """Evict ``e``'s pod (the Eviction API), or, for a ``PastPdbEviction``, delete it; a dry-run
    (``dry_run``) of either. Raises what the API raised."""
    if not e.past_pdb:
        ex.evict(e.pod, e.uid, dry_run=dry_run)
        return
    if not e.uid:  # never an unconditional DELETE: it could remove a pod recreated under the name
        raise KubeError(f"delete {e.pod} past its PodDisruptionBudget: no uid to delete it by")
    if not dry_run:
        ex.fence(f"delete {e.pod} past its PodDisruptionBudget")
    ns, name = split(e.pod)
    ex.api.delete(PODS, name, ns, uid=e.uid, dry_run=dry_run)
    if dry_run:
        return
    log.warning("elastic worker removed past the PodDisruptionBudget that refused its eviction",
                extra={"pod": e.pod, "job": e.job, "for": e.for_gang})
    ref = evicted_pod_ref(ns, name, e.uid)
    if ref is not None:
        ex.recorder.emit(ref, "Warning", "DisruptionBudgetPassed",
                         f"a PodDisruptionBudget refused this elastic worker's eviction and no other victim makes "
                         f"room for gang {e.for_gang}: deleted past the PDB. Workers above a job's "
                         "elasticPolicy.minReplicas are borrowed capacity; a PDB protects the job's min workers "
                         "(and its master), never the borrowed ones")
