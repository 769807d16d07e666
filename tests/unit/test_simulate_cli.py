"""``volcano-elastic simulate`` end to end on small inputs: outputs, bad input, plots."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from elastic_controller.simulate import plots
from elastic_controller.simulate.report import SUMMARY_KEYS, percentile

CLUSTER = "nodes:\n  - {name: gpu, count: 4, gpus: 8}\nqueues:\n  - {name: a, weight: 2}\n  - {name: b}\n"
TRACE = """\
name,submit,queue,min,max,gpus,work
one,0,a,1,2,8,28800
two,60,b,1,1,8,14400
three,120,a,2,4,4,57600
four,600,b,1,4,8,57600
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "cluster.yaml").write_text(CLUSTER, encoding="utf-8")
    (tmp_path / "trace.csv").write_text(TRACE, encoding="utf-8")
    return {"cluster": str(tmp_path / "cluster.yaml"), "trace": str(tmp_path / "trace.csv"),
            "out": str(tmp_path / "out")}


def run(*argv: str) -> int:
    return main(["simulate", "--no-progress", *argv])


def test_all_policies_write_summary_and_jobs(files: dict[str, str], capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "have_matplotlib", lambda: False)
    assert run("--trace", files["trace"], "--cluster", files["cluster"], "--out", files["out"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads((Path(files["out"]) / "summary.json").read_text())
    inputs = summary.pop("inputs")
    assert list(summary) == ["elastic", "volcano-gang", "static-max", "static-min", "tiresias"]
    from elastic_controller import __version__

    assert (inputs["version"], inputs["trace"], inputs["cluster"]) == (__version__, files["trace"], files["cluster"])
    assert inputs["traceSha256"] == hashlib.sha256(Path(files["trace"]).read_bytes()).hexdigest()
    assert inputs["policies"] == list(summary) and inputs["config"] is None and inputs["seed"] is None
    # no --restart-penalty: the per-event cost model's default (flags record what was given)
    assert inputs["flags"]["restart_penalty"] is None and "restart_cost_model" in inputs["flags"]
    assert inputs["flags"]["out"] == files["out"]
    for values in summary.values():
        assert tuple(values) == SUMMARY_KEYS
        assert [(c["kind"], c["maxWorkers"], c["jobs"]) for c in values["perClass"]] == [
            ("elastic", 2, 1), ("elastic", 4, 2), ("rigid", 1, 1)]
        assert values["restartsPerJob"] == round(values["restarts"] / 4, 3)
    for c in summary["static-max"]["perClass"]:
        assert (c["avgJctRatioVsStaticMax"], c["jobsOver1_2xStaticMax"]) == (1.0, 0)
        assert 0 < values["gpuAllocation"] <= 1
        assert values["cooldownViolations"] == 0
    assert summary["static-max"]["restarts"] == 0
    for policy in summary:
        lines = (Path(files["out"]) / f"jobs-{policy}.csv").read_text().splitlines()
        assert len(lines) == 5
    assert "restarts/job" in out and "elastic vs static-max" in out and "elastic vs volcano-gang" in out
    assert "per class" in out and "elastic max 4" in out
    assert "plots skipped: matplotlib is not installed" in err


def test_one_policy_and_written_trace(files: dict[str, str], tmp_path: Path) -> None:
    written = tmp_path / "generated.csv"
    assert run("--generate", "12", "--seed", "3", "--cluster", files["cluster"], "--out", files["out"],
               "--policy", "static-min", "--no-plots", "--write-trace", str(written)) == 0
    summary = json.loads((Path(files["out"]) / "summary.json").read_text())
    assert summary.pop("inputs")["seed"] == 3
    assert list(summary) == ["static-min"]
    assert len(written.read_text().splitlines()) == 13
    # The written trace reads back and gives the same numbers.
    again = tmp_path / "again"
    assert run("--trace", str(written), "--cluster", files["cluster"], "--out", str(again),
               "--policy", "static-min", "--no-plots") == 0
    replay = json.loads((again / "summary.json").read_text())
    assert replay.pop("inputs")["trace"] == str(written) and replay == summary


def test_malformed_line_stops_before_simulating(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    Path(files["trace"]).write_text(TRACE.replace("three,120,a,2,4,4", "three,120,a,2,4,four"))
    assert run("--trace", files["trace"], "--cluster", files["cluster"], "--out", files["out"]) == 2
    err = capsys.readouterr().err
    assert f"{files['trace']}:4: 'gpus' must be an integer, got 'four'" in err
    assert not Path(files["out"]).exists()


@pytest.mark.parametrize(("edit", "message"), [
    (("four,600,b", "four,600,c"), "queue 'c' is not in the cluster file"),
    (("four,600,b,1,4,8", "four,600,b,1,5,8"), "5 worker(s) of 8 GPU(s) do not fit"),
], ids=["unknown-queue", "gang-too-big"])
def test_trace_that_cannot_run(files: dict[str, str], capsys: pytest.CaptureFixture[str],
                               edit: tuple[str, str], message: str) -> None:
    Path(files["trace"]).write_text(TRACE.replace(*edit))
    assert run("--trace", files["trace"], "--cluster", files["cluster"], "--out", files["out"]) == 2
    err = capsys.readouterr().err
    assert f"{files['trace']}:5: job four: {message}" in err


@pytest.mark.parametrize("argv", [
    ["--cluster", "X"],
    ["--trace", "X"],
    ["--example", "--trace", "X"],
    ["--example", "--scaling-efficiency", "2"],
    ["--example", "--config", "/nonexistent/config.yaml"],
], ids=["no-trace", "no-cluster", "example-and-trace", "bad-curve", "missing-config"])
def test_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(*argv) == 2
    assert capsys.readouterr().err.startswith("volcano-elastic simulate: ")


def test_plots_when_matplotlib_is_there(files: dict[str, str]) -> None:
    pytest.importorskip("matplotlib")
    assert run("--trace", files["trace"], "--cluster", files["cluster"], "--out", files["out"]) == 0
    for name in ("allocation.png", "jct_cdf.png", "jct_by_class.png"):
        assert (Path(files["out"]) / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_give_each_policy_one_colour_everywhere(files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plot draws a policy in its one colour (Okabe-Ito: no red/green pair), the JCT axis in
    hours/days, and the class chart says how many jobs each bar averages."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    drawn: dict[str, list[tuple[str, str]]] = {}
    saved = plt.Figure.savefig

    def record(fig: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        from matplotlib.colors import to_hex

        (ax,) = fig.axes
        pairs = [(line.get_label(), to_hex(line.get_color())) for line in ax.get_lines() if line.get_label()[0] != "_"]
        pairs += [(c.get_label(), to_hex(c.patches[0].get_facecolor())) for c in ax.containers]
        drawn[Path(path).name] = pairs
        if Path(path).name == "jct_cdf.png":
            drawn["ticks"] = [(t.get_text(), "") for t in ax.get_xticklabels()]
        if Path(path).name == "jct_by_class.png":
            drawn["classes"] = [(t.get_text(), "") for t in ax.get_xticklabels()]
        return saved(fig, path, *args, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", record)
    assert run("--trace", files["trace"], "--cluster", files["cluster"], "--out", files["out"]) == 0
    colours = {policy: colour for name in ("allocation.png", "jct_cdf.png", "jct_by_class.png")
               for policy, colour in drawn[name]}
    for name in ("allocation.png", "jct_cdf.png", "jct_by_class.png"):
        assert drawn[name] and all(colours[p] == c for p, c in drawn[name]), (name, drawn[name])
    assert colours == {p: c.lower() for p, (c, _) in plots.POLICY_STYLE.items()}
    assert len(set(colours.values())) == 5
    labels = [t for t, _ in drawn["ticks"]]
    assert labels and all(t.endswith((" min", " h", " d", " w")) for t in labels), labels
    assert [t for t, _ in drawn["classes"]] == ["elastic 2\n1 jobs", "elastic 4\n2 jobs", "rigid 1\n1 jobs"]


@pytest.mark.parametrize(("low", "high", "labels"), [
    (0.5, 30, ["30 min", "1 h", "2 h", "6 h", "12 h", "1 d"]),
    (3, 5, ["2 h", "6 h"]),  # a narrow range still gets a tick each side
])
def test_time_ticks(low: float, high: float, labels: list[str]) -> None:
    assert [label for _, label in plots.time_ticks(low, high)] == labels


def test_a_queue_tree_simulated_flat_is_warned_about(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = Path(__file__).resolve().parents[2] / "examples" / "simulate" / "department-tree.yaml"
    args = ["--cluster", str(tree), "--generate", "6", "--no-plots", "--policy", "static-max"]
    assert run(*args, "--out", str(tmp_path / "flat")) == 0
    err = capsys.readouterr().err
    assert err.startswith("volcano-elastic simulate: warning: the cluster's queues form a tree (")
    assert "--shares capacity --hierarchy" in err
    assert run(*args, "--shares", "capacity", "--hierarchy", "--out", str(tmp_path / "tree")) == 0
    assert "warning" not in capsys.readouterr().err


def test_each_time_column_has_one_unit(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--trace", files["trace"], "--cluster", files["cluster"], "--out", files["out"], "--no-plots") == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("policy"))
    import re

    units = re.findall(r"(avg JCT|p50 JCT|p99 JCT|avg queue) \((s|min|h)\)", header)
    assert [u[0] for u in units] == ["avg JCT", "p50 JCT", "p99 JCT", "avg queue"], header
    lines = out.splitlines()
    start = lines.index(header)
    rows = [line.split() for line in lines[start + 2:start + 7]]  # the five policies, under the rule
    assert [r[0] for r in rows] == ["elastic", "volcano-gang", "static-max", "static-min", "tiresias"]
    assert all(re.fullmatch(r"[\d,]+(\.\d+)?", cell) for row in rows for cell in row[5:9]), rows


def test_time_units() -> None:
    from elastic_controller.simulate.units import time_unit

    assert [time_unit(v).name for v in ([30, 119], [30, 120], [7199], [7200, 5], [])] == ["s", "min", "min", "h", "s"]
    assert time_unit([7200, 5])(5) == "0.00" and time_unit([7200])(9000) == "2.50"


def test_bundled_example_is_small_and_valid() -> None:
    from importlib.resources import files as package_files

    from elastic_controller.simulate.cluster import parse_cluster
    from elastic_controller.simulate.trace import parse_own_csv
    from elastic_controller.simulate.validate import check_jobs

    base = package_files("elastic_controller") / "examples" / "sim"
    cluster = parse_cluster(base.joinpath("cluster.yaml").read_text(encoding="utf-8"), "cluster.yaml")
    text = base.joinpath("trace.csv").read_text(encoding="utf-8")
    jobs = parse_own_csv(text, "trace.csv")
    assert (cluster.node_count, cluster.total_gpus, len(jobs)) == (64, 512, 500)
    assert len(text) < 200_000
    assert check_jobs(jobs, cluster, ["static-max"], "trace.csv") == []


def test_percentile() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)


def test_progress_bar_only_on_a_terminal_and_after_a_delay() -> None:
    import io

    from elastic_controller.simulate.progress import ProgressBar

    quiet = io.StringIO()
    bar = ProgressBar("elastic", quiet)  # StringIO is not a terminal
    bar(1, 2)
    bar.close()
    assert quiet.getvalue() == ""
    drawn = io.StringIO()
    bar = ProgressBar("elastic", drawn, delay=0, force=True)
    bar(250, 500)
    bar.close()
    assert "50.0% 250/500 jobs" in drawn.getvalue() and drawn.getvalue().endswith("\n")


def test_cluster_queues_with_capacity_fields() -> None:
    from elastic_controller.simulate.cluster import dump_cluster, parse_cluster

    text = ("nodes:\n  - {name: gpu, count: 2, gpus: 8}\nqueues:\n"
            "  - {name: dept, capability: {nvidia.com/gpu: 12}}\n"
            "  - {name: team, parent: dept, deserved: {nvidia.com/gpu: 4, cpu: 10}, guarantee: {nvidia.com/gpu: 2}}\n"
            "  - {name: scratch, parent: dept, reclaimable: false}\n"
            "  - {name: other, parent: root, weight: 3}\n")
    cluster = parse_cluster(text, "c.yaml")
    dept, team, scratch, other = cluster.queues
    assert dept.capability == {"nvidia.com/gpu": 12} and dept.parent == ""
    assert team.deserved == {"nvidia.com/gpu": 4, "cpu": 10_000} and team.guarantee == {"nvidia.com/gpu": 2}
    assert (team.parent, scratch.parent, scratch.reclaimable, other.parent, other.weight) == ("dept", "dept", False,
                                                                                              "", 3)
    assert parse_cluster(dump_cluster(cluster), "again.yaml") == cluster


@pytest.mark.parametrize(("queue", "message"), [
    ("{name: a, deserved: 4}", "'deserved' must be a non-empty map"),
    ("{name: a, guarantee: {}}", "'guarantee' must be a non-empty map"),
    ("{name: a, capability: {nvidia.com/gpu: lots}}", "'capability': not a quantity"),
    ("{name: a, deserved: {cpu: -1}}", "must not be negative"),
    ("{name: a, parent: nowhere}", "parent 'nowhere' is not a queue of the file"),
    ("{name: a, parent: a}", "'parent' must be another queue's name"),
])
def test_cluster_queue_errors(queue: str, message: str) -> None:
    from elastic_controller.simulate.cluster import parse_cluster
    from elastic_controller.simulate.trace import TraceError

    with pytest.raises(TraceError, match=message):
        parse_cluster(f"nodes:\n  - {{name: gpu, count: 1, gpus: 8}}\nqueues:\n  - {queue}\n", "c.yaml")


def test_capacity_shares_simulated_on_the_department_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --shares capacity --hierarchy: the simulated Volcano and the agent both judge by the capacity plugin.
    tree = Path(__file__).resolve().parents[2] / "examples" / "simulate" / "department-tree.yaml"
    assert run("--cluster", str(tree), "--generate", "12", "--shares", "capacity", "--hierarchy", "--no-plots",
               "--no-progress", "--policy", "static-max", "--out", str(tmp_path / "out")) == 0
    assert "queue shares: capacity (hierarchical)" in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["static-max"]["restarts"] == 0


@pytest.mark.parametrize(("flags", "config", "message"), [
    (["--hierarchy"], "", "--hierarchy (shares.hierarchy) needs --shares capacity"),
    (["--shares", "proportion"], "shares: {plugin: proportion, hierarchy: true}\n",
     "hierarchical queues need shares.plugin: capacity"),
])
def test_shares_flags_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], config: str,
                              message: str) -> None:
    args = ["--example", "--out", str(tmp_path / "out"), *flags]
    if config:
        (tmp_path / "config.yaml").write_text(config)
        args += ["--config", str(tmp_path / "config.yaml")]
    assert run(*args) == 2
    assert message in capsys.readouterr().err


def test_capacity_gang_beyond_real_capability_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text("nodes:\n  - {name: gpu, count: 2, gpus: 8}\nqueues:\n"
                       "  - {name: a, capability: {nvidia.com/gpu: 8}}\n")
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,queue,priority,min,max,gpus,work\nbig,0,a,0,3,3,4,100\n")
    assert run("--cluster", str(cluster), "--trace", str(trace), "--shares", "capacity",
               "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert "job big: 3 worker(s) of 4 GPU(s) exceed the real capability of its queue (GPUs: a 8)" in err
