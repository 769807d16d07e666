"""``volcano-elastic release-gates [--all | JOB]``: lift our scale-up gates (run before uninstalling,
or elastic pods stay Pending forever). Other gates are kept; pods of finished jobs are skipped."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import add_config_flag, add_kubeconfig_flag, fail, load_config_or_exit, natural_sorted

HELP = "lift the volcano-elastic scale-up gate from elastic pods (all, or one job's)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", nargs="?", help="NAMESPACE/NAME or NAME (with -n) of a PyTorchJob")
    parser.add_argument("--all", action="store_true", help="every gated pod in the cluster (or in -n)")
    parser.add_argument("-n", "--namespace", help="namespace of JOB, or the scope of --all")
    add_kubeconfig_flag(parser, context=True)
    add_config_flag(parser, "for gating.gateName")
    parser.add_argument("--dry-run", action="store_true", help="print what would be lifted")


def select(pods: list[dict[str, Any]], jobs: list[dict[str, Any]], gate: str, namespace: str | None,
           job: str | None) -> tuple[list[str], list[str]]:
    """(pods to release, pods skipped because their job finished or is suspended), as ns/name."""
    from ..policy import keys
    from ..policy.parse import ParseError, parse_job

    retired: set[str] = set()
    for raw in jobs:
        try:
            view = parse_job(raw)
        except ParseError:
            continue
        if view.finished or view.suspended:
            retired.add(view.key)
    chosen: list[str] = []
    skipped: list[str] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        if gate not in gates or meta.get("deletionTimestamp"):
            continue
        if namespace and ns != namespace:
            continue
        job_name = (meta.get("labels") or {}).get(keys.JOB_NAME_LABEL, "")
        if job and f"{ns}/{job_name}" != job:
            continue
        key = f"{ns}/{meta.get('name')}"
        (skipped if f"{ns}/{job_name}" in retired else chosen).append(key)
    return natural_sorted(chosen), natural_sorted(skipped)


def job_exists(job: str, pods: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> bool:
    """Whether ``job`` (ns/name) is a PyTorchJob, or names the pods of one (its label)."""
    from ..policy import keys

    ns, _, name = job.partition("/")
    if any((j.get("metadata") or {}).get("name") == name and (j.get("metadata") or {}).get("namespace") == ns
           for j in jobs):
        return True
    return any(((p.get("metadata") or {}).get("labels") or {}).get(keys.JOB_NAME_LABEL) == name
               and (p.get("metadata") or {}).get("namespace") == ns for p in pods)


def run(args: argparse.Namespace) -> int:
    from ..execute.gates import lift_gate
    from ..kube.errors import KubeError, NotFoundError
    from ..kube.resources import PODS, PYTORCHJOBS
    from .connect import connect

    if bool(args.all) == bool(args.job):
        fail("release-gates", "give either --all or one JOB")
    job = args.job
    if job and "/" not in job:
        if not args.namespace:
            fail("release-gates", "JOB needs a namespace (NAMESPACE/NAME or -n)")
        job = f"{args.namespace}/{job}"
    cfg = load_config_or_exit(args, "release-gates")
    gate = cfg.gating.gateName
    scope = job.split("/", 1)[0] if job else args.namespace
    client = connect(args, "release-gates")
    try:
        pods, _ = client.list(PODS, scope)
        try:
            jobs, _ = client.list(PYTORCHJOBS, scope)
        except NotFoundError:
            jobs = []
    except KubeError as exc:
        fail("release-gates", str(exc), 1)
    if job and not job_exists(job, pods, jobs):
        fail("release-gates", f"job {job} not found (no PyTorchJob of that name, and no pod labelled with it)", 1)
    chosen, skipped = select(pods, jobs, gate, scope, job)
    failed = 0
    for key in chosen:
        if args.dry_run:
            print(f"would lift {gate} from {key}")
            continue
        try:
            lift_gate(client, key, gate)
            print(f"lifted {gate} from {key}")
        except KubeError as exc:
            failed += 1
            print(f"volcano-elastic release-gates: failed on {key}: {exc}", file=sys.stderr)
    for key in skipped:
        print(f"skipped {key}: its job finished or is suspended (the controller removes such pods)")
    if not chosen:
        print(f"no pod carries {gate}" + (f" in {job}" if job else ""))
    return 1 if failed else 0
