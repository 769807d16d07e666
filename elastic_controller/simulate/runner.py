"""One simulation run of several policies on one trace: results, summary.json, the tables."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..policy.settings import ElasticConfig
from .classes import class_table
from .cluster import ClusterSpec
from .engine import SimResult, SimSettings, simulate
from .progress import ProgressBar
from .report import comparison, jobs_csv, summarize, table
from .tiresias import NAME as TIRESIAS
from .tiresias import TiresiasParams, simulate_tiresias
from .trace import JobSpec


@dataclass(frozen=True, slots=True)
class RunOutput:
    results: tuple[SimResult, ...]
    summaries: dict[str, dict[str, Any]]


def run_policies(jobs: list[JobSpec], cluster: ClusterSpec, cfg: ElasticConfig, policies: Sequence[str],
                 settings: SimSettings, out: Path, progress: bool = True, label: str = "",
                 inputs: dict[str, Any] | None = None, tiresias: TiresiasParams | None = None) -> RunOutput:
    """Simulate each policy, write jobs-<policy>.csv and summary.json under ``out`` (``inputs``: what
    the run was made of, written first in summary.json under ``inputs``, beside the policies).

    The per-class ratios compare every policy with static-max on the same trace: when static-max
    is not among ``policies`` it is simulated too, as the reference (not reported).
    """
    order = sorted(policies, key=lambda p: p != "static-max")  # the reference first
    results: dict[str, SimResult] = {}
    for policy in order:
        bar = ProgressBar(f"{label}{policy}") if progress else None
        result = (simulate_tiresias(jobs, cluster, settings, tiresias) if policy == TIRESIAS
                  else simulate(jobs, cluster, cfg, policy, settings, progress=bar))
        if bar is not None:
            bar.close()
        if result.rejected_decisions:
            print(f"warning: {policy}: {len(result.rejected_decisions)} decision(s) of the planner could not "
                  f"be applied, first: {result.rejected_decisions[0]}", file=sys.stderr)
        results[policy] = result
    reference = results.get("static-max")
    if reference is None:
        bar = ProgressBar(f"{label}static-max (reference)") if progress else None
        reference = simulate(jobs, cluster, cfg, "static-max", settings, progress=bar)
        if bar is not None:
            bar.close()
    ordered = tuple(results[p] for p in policies)
    summaries = {r.policy: summarize(r, reference) for r in ordered}
    for r in ordered:
        (out / f"jobs-{r.policy}.csv").write_text(jobs_csv(r), encoding="utf-8")
    document = {"inputs": inputs, **summaries} if inputs is not None else summaries
    (out / "summary.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return RunOutput(ordered, summaries)


def print_run(run: RunOutput) -> None:
    print(table(run.results, run.summaries))
    for peer in ("volcano-gang", "static-max"):
        line = comparison(run.summaries, peer)
        if line:
            print(line)
    print()
    print("per class (kind and max workers in the trace; ratios against the same jobs under static-max):")
    print(class_table(run.results, run.summaries))
    for r in run.results:
        if r.policy == "elastic":
            print(f"elastic: {r.plan_calls} planning cycles ({r.plan_seconds:.1f}s in plan_cycle), "
                  f"{r.cycles_skipped} skipped as idle; simulated in {r.wall_seconds:.1f}s")
            if r.notices:
                print(f"elastic: {r.notices} eviction notices ({r.notices_ended_by_checkpoint} ended early by a "
                      f"checkpoint, {r.notices_withdrawn} withdrawn); victims held "
                      f"{r.notice_gpu_seconds / 3600:,.1f} GPU-hours under notice")
