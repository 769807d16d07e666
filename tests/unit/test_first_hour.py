"""Issue 40, item 8: the smaller things a new admin or researcher met in the first hour, each as seen."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from elastic_controller.policy.cooldowns import fulfillment
from elastic_controller.policy.parse import parse_objects
from tests.harness.examples import EXAMPLES, PLANNED_AT, example_items
from tests.harness.statuscli import _a_kubeconfig, serve  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_line_status_prints_on_stderr_has_the_prefix(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "the Volcano scheduler configuration was not found; shares not checked" on every run
    where the scheduler's ConfigMap was absent, unprefixed (a log record through Python's last resort)."""
    serve(monkeypatch, *example_items("scale-down-for-gang"))
    code, out, err = run(capsys, "status", "--now", PLANNED_AT, "--config-from", "")
    assert code == 0 and err == "", err
    assert "SHARES proportion (not checked: volcano-system/volcano-scheduler-configmap not found)" in out


def test_a_yaml_dump_gets_a_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump(json.loads((EXAMPLES / "scale-down-for-gang.json").read_text())))
    code, _, err = run(capsys, "plan", "--from", str(dump), "--now", PLANNED_AT)
    assert code == 2 and "not valid JSON" in err
    assert "(it looks like YAML: dump as JSON, `kubectl get nodes,pods,podgroups,queues,priorityclasses," \
           "pytorchjobs -A -o json`)" in err


def test_plans_own_output_is_no_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--from", str(EXAMPLES / "scale-down-for-gang.json"), "--now", PLANNED_AT,
                       "-o", "json")
    assert code == 0 and json.loads(out)["kind"] == "Plan"
    planned = tmp_path / "plan.json"
    planned.write_text(out)
    code, out, err = run(capsys, "plan", "--from", str(planned), "--now", PLANNED_AT)
    assert code == 2 and out == ""
    assert err.startswith(f"volcano-elastic plan: {planned}: a volcano-elastic Plan document (an output of this "
                          "tool), not a cluster dump"), err


@pytest.mark.parametrize("argv", [["status", "--bogus"], ["plan", "--from", "x.json", "--bogus"],
                                  ["queues", "--frm", "x.json"]])
def test_an_unknown_flag_prints_the_subcommands_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.startswith(f"usage: volcano-elastic {argv[0]} "), err
    assert f"volcano-elastic {argv[0]}: error: unrecognized arguments: {argv[-1]}" in err or \
        f"unrecognized arguments: {' '.join(argv[1:])}" in err


@pytest.mark.parametrize(("flags", "said"), [
    (["--service", "Bad_Name", "--namespace", "ok"], "--service 'Bad_Name' is not a valid Service name"),
    (["--service", "9lives", "--namespace", "ok"], "--service '9lives' is not a valid Service name"),
    (["--service", "ok", "--namespace", "Team.A"], "--namespace 'Team.A' is not a valid namespace"),
])
def test_certs_refuse_a_name_no_service_can_have(flags: list[str], said: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    code, _, err = run(capsys, "certs", "generate", *flags, "--out", str(out))
    assert code == 2 and err.startswith(f"volcano-elastic certs generate: {said}"), err
    assert not out.exists() or not any(out.iterdir())


def test_certs_still_issue_for_a_valid_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "certs", "generate", "--service", "volcano-elastic-webhook", "--namespace",
                       "volcano-elastic-system", "--out", str(tmp_path))
    assert code == 0 and "volcano-elastic-webhook.volcano-elastic-system.svc" in err


def kai(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The dump's Queues and PodGroups as KAI's kinds of the same names (another API group)."""
    out = []
    for o in items:
        if o["kind"] == "Queue":
            o = {**o, "apiVersion": "scheduling.run.ai/v2"}
        elif o["kind"] == "PodGroup":
            o = {**o, "apiVersion": "scheduling.run.ai/v2alpha2"}
        out.append(o)
    return out


def test_kai_queues_and_podgroups_are_not_read_as_volcanos() -> None:
    items = json.loads((EXAMPLES / "scale-down-for-gang.json").read_text())["items"]
    volcano, _ = parse_objects(items)
    assert volcano.queues and volcano.podgroups
    snap, warnings = parse_objects(kai(items))
    assert not snap.queues and not snap.podgroups
    assert any(re.search(r"Queue nlp is of apiVersion scheduling\.run\.ai/v2, another API's Queue \(the planner "
                         r"reads scheduling\.volcano\.sh ones\), skipped", w) for w in warnings), warnings
    assert any("PodGroup team-nlp/bert is of apiVersion scheduling.run.ai/v2alpha2" in w for w in warnings)
    assert len(snap.pods) == len(volcano.pods) and len(snap.nodes) == len(volcano.nodes)


def test_fulfillment_is_defined_for_users_as_the_code_computes_it() -> None:
    concepts = (ROOT / "docs" / "concepts.md").read_text()
    m = re.search(r"\*\*Fulfillment\.\*\* (.+?)\n\n", concepts, re.DOTALL)
    assert m, "docs/concepts.md defines fulfillment"
    text = " ".join(m.group(1).split())
    assert "(running workers - `minReplicas`) / (`maxReplicas` - `minReplicas`)" in text
    assert "a Master replica does not count" in text
    for running, lo, hi in ((2, 2, 16), (15, 2, 16), (16, 2, 16), (3, 2, 4)):
        assert fulfillment(running, lo, hi) == (running - lo) / (hi - lo)
    assert "0.00 is a job at its min, 1.00 one at its max" in text


def test_a_gang_waiting_for_cooldowns_is_told_when_the_first_ends(capsys: pytest.CaptureFixture[str]) -> None:
    """team-vision/resnet was scaled at 12:58:20; cooldown 300 s: it may be shrunk from 13:03:20."""
    code, out, _ = run(capsys, "plan", "--from", str(EXAMPLES / "cooldown-blocks-eviction.json"), "--now", PLANNED_AT,
                       "-o", "json")
    reason = json.loads(out)["starving"][0]["reason"]
    assert code == 0 and reason.endswith("candidates excluded: 14 cooldown (the first ends 2026-01-01T13:03:20Z)")


def test_the_go_version_asked_for_is_the_one_the_modules_need() -> None:
    readme = (ROOT / "README.md").read_text()
    script = (ROOT / "hack" / "build-binaries.sh").read_text()
    directives = [tuple(int(x) for x in m.group(1).split(".")[:2])
                  for p in (ROOT / "hack" / "gomod").rglob("go.mod")
                  for m in re.finditer(r"^go (\d+\.\d+)", p.read_text(), re.MULTILINE)]
    need = "{}.{}".format(*max(directives))
    asked = re.search(r"Go ≥ (\d+\.\d+)", readme)
    assert asked and asked.group(1) == need, (asked and asked.group(1), need)
    assert f"Go >= {need} toolchain" in script
    assert "15 minutes of builds" not in readme  # hack/README.md measured 40-50 min cold on 2 cores
