"""``volcano-elastic status`` against an in-memory API server holding the bundled plan examples:
the snapshot is always the whole cluster (``-n`` filters rows), output formats, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from elastic_controller.kube import client as kube_client
from elastic_controller.kube.fake import FakeKube
from tests.harness.examples import EXAMPLES, PLANNED_AT, example_items
from tests.harness.legacy import LEGACY_FLOW
from tests.harness.statuscli import (
    _a_kubeconfig,  # noqa: F401 - fixtures
    rows_of,
    serve,
    status,
)


@pytest.mark.parametrize(("name", "gang", "decision"), [
    ("scale-down-for-gang", "team-nlp/bert", "evict"),
    ("cooldown-blocks-eviction", "team-nlp/bert", "wait"),
])
def test_namespace_filters_rows_and_never_changes_a_decision(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], name: str,
                                                             gang: str, decision: str) -> None:
    serve(monkeypatch, *example_items(name))
    expected = json.loads((EXAMPLES / f"{name}.expected.json").read_text())
    (want,) = [s for s in expected["starving"] if s["podGroup"] == gang]
    assert want["decision"] == decision  # the example's reviewed story
    code, out, err = status(capsys, "-o", "json")
    assert code == 0, err
    everywhere = rows_of(json.loads(out))
    code, out, err = status(capsys, "-o", "json", "-n", gang.split("/")[0])
    assert code == 0, err
    scoped = rows_of(json.loads(out))
    assert set(scoped) == {gang} and "team-vision/resnet" in everywhere
    assert scoped[gang] == everywhere[gang]
    assert scoped[gang]["lastDecision"].startswith(f"now: {decision}: "), scoped[gang]
    assert scoped[gang]["lastDecision"] == f"now: {want['decision']}: {want['reason']}"


def test_json_and_yaml_are_versioned_with_queues_under_their_own_key(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    serve(monkeypatch, *example_items("scale-up-into-idle-gpus"))
    code, out, _ = status(capsys, "-o", "json")
    doc = json.loads(out)
    assert code == 0 and (doc["apiVersion"], doc["kind"], doc["now"]) == ("volcano-elastic.io/v1", "Status", PLANNED_AT)
    assert set(doc) == {"apiVersion", "kind", "now", "namespace", "configSource", "queues", "evictionNotices",
                        "heldJobs", "skippedObjects", "alarms"}
    assert set(doc["queues"]) == {"vision", "nlp"}
    code, out, _ = status(capsys, "-o", "yaml")
    assert code == 0 and yaml.safe_load(out) == doc


def test_gated_pods_say_why_with_the_planners_codes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled scale-up example: resnet (at its min, 2 of 2..16) grows now; gpt (3 of 4) could take
    one more but +33% is below minScaleUpGain: plan's HOLD note, read-only, in status. (gpt elastic from
    its min: wholeGangUpTo 0, as the example's recorded plan was made.)"""
    serve(monkeypatch, *example_items("scale-up-into-idle-gpus"))
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text(f"defaults: {{{LEGACY_FLOW}}}\n")
    plan_doc = json.loads((EXAMPLES / "scale-up-into-idle-gpus.expected.json").read_text())
    _, out, _ = status(capsys, "--config", str(legacy), "-o", "json")
    rows = rows_of(json.loads(out))
    resnet, gpt = rows["team-vision/resnet"], rows["team-nlp/gpt"]
    assert resnet["gatedReason"]["reason"] == "Growing" and resnet["gatedReason"]["message"].startswith(
        "6 released this cycle: job team-vision/resnet grows from 2 to 8")
    (note,) = plan_doc["notes"]
    assert gpt["gatedReason"] == {k: note[k] for k in ("job", "reason", "until", "message")}
    assert (resnet["elasticWorkers"], resnet["elasticMax"], resnet["fulfillment"]) == (0, 14, 0.0)
    _, table_out, _ = status(capsys, "--config", str(legacy))
    line = next(line for line in table_out.splitlines() if "team-nlp/gpt" in line).split()
    assert line[4:6] == ["2/3", "-"] and line[7:9] == ["1", "BelowMinScaleUpGain"], line  # [6]: RESTARTS
    resnet_line = next(line for line in table_out.splitlines() if "team-vision/resnet" in line).split()
    assert resnet_line[4] == "0/14" and resnet_line[8] == "Growing"
    assert note["message"] not in table_out  # the code in the table, the whole reason under -o wide
    _, wide, _ = status(capsys, "--config", str(legacy), "-o", "wide")
    assert note["message"] in wide
    header = next(line for line in table_out.splitlines() if line.strip().startswith("JOB"))
    assert header.split()[:5] == ["JOB", "MIN", "CUR", "MAX", "ELASTIC"]


def test_jobs_sort_naturally(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.harness.builders import dump, elastic_job, node

    serve(monkeypatch, *dump(node("n0"), *(elastic_job("ns", f"j{i}", min_r=1, max_r=1, nodes=["n0"], running=1)
                                           for i in (10, 2, 1)))["items"])
    _, out, _ = status(capsys, "-o", "json")
    assert [r["job"] for r in json.loads(out)["queues"]["default"]] == ["ns/j1", "ns/j2", "ns/j10"]


def test_a_missing_kubeconfig_is_said_plainly(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    code, out, err = status(capsys, "--kubeconfig", str(missing))
    assert code == 1 and out == ""
    assert err == f"volcano-elastic status: kubeconfig {missing} (--kubeconfig) does not exist\n"


def test_no_kubeconfig_at_all_is_said_plainly(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = status(capsys)
    assert code == 1 and err.startswith("volcano-elastic status: no kubeconfig: pass --kubeconfig")


def test_context_is_passed_to_the_client(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    seen: list[Any] = []
    kube = FakeKube()

    def from_kubeconfig(cls: Any, path: Any = None, settings: Any = None, context: Any = None) -> FakeKube:
        seen.append((path, context))
        return kube

    monkeypatch.setattr(kube_client.KubeClient, "from_kubeconfig", classmethod(from_kubeconfig))
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\ncontexts: [{name: lab}, {name: prod}]\n")
    code, out, _ = status(capsys, "--kubeconfig", str(config), "--context", "prod", "-o", "json")
    assert code == 0 and seen == [(str(config), "prod")] and json.loads(out)["queues"] == {}
    code, out, err = status(capsys, "--kubeconfig", str(config), "--context", "prd")
    assert code == 1 and out == "" and seen == [(str(config), "prod")]
    assert err == f"volcano-elastic status: context 'prd' is not in kubeconfig {config} (it has: lab, prod)\n"


def test_release_gates_of_a_job_that_does_not_exist_fails(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    serve(monkeypatch, *example_items("scale-up-into-idle-gpus"))
    code = main(["release-gates", "team-vision/nosuch", "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("volcano-elastic release-gates: job team-vision/nosuch not found")
    code = main(["release-gates", "-n", "team-vision", "resnet", "--dry-run"])
    out, _ = capsys.readouterr()
    lifted = [line.rsplit(" ", 1)[1] for line in out.splitlines()]
    assert code == 0 and lifted == [f"team-vision/resnet-worker-{i}" for i in range(2, 16)]  # 2 .. 9, 10 .. 15


@pytest.mark.parametrize("argv", [["release-gates"], ["release-gates", "j"], ["status", "--now", "soon"],
                                  ["plan", "--from", "/nonexistent.json"], ["queues", "--from", "/nonexistent.json"]])
def test_every_command_fails_with_one_prefix(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"volcano-elastic {argv[0]}: ") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("command", ["status", "queues"])
def test_a_namespaced_user_is_told_what_access_is_needed(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], command: str) -> None:
    from elastic_controller.kube.errors import ForbiddenError

    kube = serve(monkeypatch, *example_items("scale-down-for-gang"))
    listed = kube.list

    def namespaced_user(res: Any, namespace: str | None = None, **kw: Any) -> Any:
        if not namespace:
            raise ForbiddenError(f"list {res.plural}: 403 Forbidden", 403)
        return listed(res, namespace, **kw)

    monkeypatch.setattr(kube, "list", namespaced_user)
    code = main([command, "--now", PLANNED_AT])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith(f"volcano-elastic {command}: list nodes: 403 Forbidden (decisions are planned")
    assert len(err.splitlines()) == 1
    assert "volcano-elastic-viewer ClusterRole" in err


@pytest.mark.parametrize(("name", "job", "code"), [
    ("not-starving-yet-holds-scale-up", "team-vision/resnet", "WaitingGang"),  # a waiting gang holds growth
    ("own-queue-over-share", "team-vision/resnet", "NoRoom"),  # its queue is over its share
    ("own-queue-over-share", "team-nlp/gpt", "Growing"),  # nlp grows around the gang's room
])
def test_why_gated_on_the_bundled_stories(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                          name: str, job: str, code: str) -> None:
    serve(monkeypatch, *example_items(name))
    expected = json.loads((EXAMPLES / f"{name}.expected.json").read_text())
    _, out, _ = status(capsys, "-o", "json")
    row = rows_of(json.loads(out))[job]
    assert row["gated"] > 0 and row["gatedReason"]["reason"] == code, row
    assert (code == "WaitingGang") == bool(expected["scaleUpBlockedBy"])
    assert (code == "Growing") == any(g["job"] == job for g in expected["gateReleases"])
