"""``volcano-elastic plan``: input handling, exit codes, warnings, output shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.cli import main
from tests.harness.builders import NOW, dump, elastic_job, gang, node, pod, ts


def write(path: Path, doc: Any) -> str:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


CLUSTER = dump(node("n0"), elastic_job("ns", "v", min_r=2, max_r=6, nodes=["n0"], running=6),
               gang("ns", "g", members=1, gpus=4))


@pytest.fixture
def snapshot(tmp_path: Path) -> str:
    return write(tmp_path / "snap.json", CLUSTER)


def test_json_output_shape(capsys: pytest.CaptureFixture[str], snapshot: str) -> None:
    code, out, err = run(capsys, "--from", snapshot, "--now", ts(NOW), "--output", "json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert set(doc) == {"apiVersion", "kind", "now", "starving", "evictions", "gateReleases", "scaleUpBlockedBy",
                        "notes", "attainedService"}
    # GPU-seconds held per job (issue 38): v's workers, placed an hour before NOW (the builders' default)
    assert all(set(a) == {"job", "gpuSeconds"} for a in doc["attainedService"])
    assert {a["job"]: a["gpuSeconds"] > 0 for a in doc["attainedService"]}["ns/v"]
    assert (doc["apiVersion"], doc["kind"], doc["now"]) == ("volcano-elastic.io/v1", "Plan", ts(NOW))
    assert doc["scaleUpBlockedBy"] == ["ns/g"] and doc["notes"] == []
    assert doc["starving"] == [{"podGroup": "ns/g", "queue": "default", "decision": "evict",
                                "reason": doc["starving"][0]["reason"]}]
    assert [e["pod"] for e in doc["evictions"]] == ["ns/v-worker-5", "ns/v-worker-4"]
    for e in doc["evictions"]:
        assert set(e) == {"pod", "node", "job", "queue", "for", "reason"}
        assert (e["node"], e["job"], e["queue"], e["for"]) == ("n0", "ns/v", "default", "ns/g")
        assert e["reason"]
    assert doc["gateReleases"] == []


def test_gate_release_json_shape(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = write(tmp_path / "s.json", dump(node("n0"), elastic_job("ns", "j", min_r=1, max_r=2, nodes=["n0"],
                                                                    running=1)))
    code, out, _ = run(capsys, "--from", snap, "--now", ts(NOW), "-o", "json")
    (rel,) = json.loads(out)["gateReleases"]
    assert code == 0 and set(rel) == {"pod", "job", "node", "reason"}
    assert (rel["pod"], rel["job"], rel["node"]) == ("ns/j-worker-1", "ns/j", "n0")


def test_table_output(capsys: pytest.CaptureFixture[str], snapshot: str) -> None:
    code, out, _ = run(capsys, "--from", snapshot, "--now", ts(NOW))
    lines = out.strip().splitlines()
    assert code == 0
    assert lines[0].split() == ["ACTION", "OBJECT", "WHERE", "WHY"]
    assert lines[1].split()[:4] == ["STARVING", "ns/g", "queue=default", "EVICT:"]
    assert sum(line.startswith("EVICT ") for line in lines) == 2
    assert lines[-1].split(None, 2) == ["GROW", "none", "held back by waiting gang(s) ns/g"]


def test_table_output_says_why_growth_is_held(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # c (1..4) at 2 could grow to 4 on n1, which would let gang g evict it (issue 19: no flapping).
    snap = write(tmp_path / "s.json", dump(
        node("n0", gpus=2), node("n1", gpus=4),
        elastic_job("ta", "a", min_r=1, max_r=2, running=2, nodes=["n0"]),  # two tenants: minWorkersToShrink
        elastic_job("tc", "c", min_r=1, max_r=4, running=2, nodes=["n1"]),  # counts a tenant's (issue 36 T14)
        gang("ns", "g", members=1, gpus=3)))
    code, out, _ = run(capsys, "--from", snap, "--now", ts(NOW))
    holds = [line for line in out.splitlines() if line.startswith("HOLD ")]
    assert code == 0 and len(holds) == 1 and "job tc/c stays at 2" in holds[0] and "ns/g" in holds[0], out
    assert holds[0].split()[1:3] == ["tc/c", "WaitingGangNeedsIt"]


def test_several_from_files_are_combined(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a = write(tmp_path / "nodes.json", dump(node("n0")))
    b = write(tmp_path / "pods.json", dump(elastic_job("ns", "v", min_r=2, max_r=6, nodes=["n0"], running=6)))
    c = write(tmp_path / "gang.json", gang("ns", "g", members=1, gpus=4)[1])  # a single object, not a List
    d = write(tmp_path / "pg.json", gang("ns", "g", members=1, gpus=4)[:1])  # a bare JSON array
    code, out, _ = run(capsys, "--from", a, "--from", b, "--from", c, "--from", d, "--now", ts(NOW), "-o", "json")
    assert code == 0 and len(json.loads(out)["evictions"]) == 2


def test_same_as_one_file(capsys: pytest.CaptureFixture[str], snapshot: str, tmp_path: Path) -> None:
    items = CLUSTER["items"]
    half = len(items) // 2
    a = write(tmp_path / "a.json", dump(items[:half]))
    b = write(tmp_path / "b.json", dump(items[half:]))
    _, one, _ = run(capsys, "--from", snapshot, "--now", ts(NOW), "-o", "json")
    _, two, _ = run(capsys, "--from", b, "--from", a, "--now", ts(NOW), "-o", "json")
    assert json.loads(one) == json.loads(two)


def test_now_defaults_to_the_clock(capsys: pytest.CaptureFixture[str], snapshot: str) -> None:
    code, out, _ = run(capsys, "--from", snapshot, "-o", "json")
    assert code == 0 and "starving" in json.loads(out)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        pytest.param("{not json", "not valid JSON", id="bad-json"),
        pytest.param("", "not valid JSON", id="empty-file"),
        pytest.param("42", "expected a kubectl List", id="scalar"),
        pytest.param('{"foo": 1}', "expected a kubectl List", id="object-without-kind"),
        pytest.param(b"\xff\xfe\x00garbage", "cannot read", id="not-utf8"),
    ],
)
def test_bad_input_exit_2_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: Any,
                                   fragment: str) -> None:
    f = tmp_path / "bad.json"
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content)
    code, out, err = run(capsys, "--from", str(f))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err and str(f) in err


def test_unreadable_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "--from", str(tmp_path / "missing.json"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "cannot read" in err
    code, _, err = run(capsys, "--from", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("now", [pytest.param("yesterday", id="word"),
                                 pytest.param("2026-13-01T00:00:00Z", id="month-13"), pytest.param("", id="empty")])
def test_bad_now(capsys: pytest.CaptureFixture[str], snapshot: str, now: str) -> None:
    code, out, err = run(capsys, "--from", snapshot, "--now", now)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--now" in err


@pytest.mark.parametrize("now", [pytest.param("2026-01-01T13:00:00Z", id="zulu"),
                                 pytest.param("2026-01-01T14:00:00+01:00", id="offset"),
                                 pytest.param("2026-01-01T13:00:00.5Z", id="fraction")])
def test_good_now(capsys: pytest.CaptureFixture[str], snapshot: str, now: str) -> None:
    code, out, _ = run(capsys, "--from", snapshot, "--now", now, "-o", "json")
    assert code == 0 and len(json.loads(out)["evictions"]) == 2


def test_bad_config_lists_every_path(capsys: pytest.CaptureFixture[str], snapshot: str, tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.yaml", "bogus: 1\ndefaults: {cooldownSeconds: -1}\nqueues: {q: {nope: 2}}\n")
    code, out, err = run(capsys, "--from", snapshot, "--config", cfg)
    assert code == 2 and out == ""
    for path in ("bogus", "defaults.cooldownSeconds", "queues.q.nope"):
        assert f"{path}:" in err


def test_missing_config_file(capsys: pytest.CaptureFixture[str], snapshot: str, tmp_path: Path) -> None:
    code, _, err = run(capsys, "--from", snapshot, "--config", str(tmp_path / "none.yaml"))
    assert code == 2 and "cannot read" in err


def test_config_is_used(capsys: pytest.CaptureFixture[str], snapshot: str, tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.yaml", "defaults: {maxEvictionsPerCycle: 1}\n")
    code, out, _ = run(capsys, "--from", snapshot, "--config", cfg, "--now", ts(NOW), "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["evictions"] == [] and doc["starving"][0]["decision"] == "wait"


def test_skipped_objects_named_in_warnings(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad_pod = pod("ns", "broken")
    del bad_pod["spec"]
    bad_node = node("n9")
    del bad_node["status"]
    no_name = {"kind": "Pod", "metadata": {}}
    bad_qty = pod("ns", "qty")
    bad_qty["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    unused = {"kind": "ConfigMap", "metadata": {"name": "x"}}
    items = [*CLUSTER["items"], bad_pod, bad_node, no_name, bad_qty, 7, unused]
    snap = write(tmp_path / "s.json", {"kind": "List", "items": items})
    code, out, err = run(capsys, "--from", snap, "--now", ts(NOW), "-o", "json")
    assert code == 0 and len(json.loads(out)["evictions"]) == 2
    warnings = err.strip().splitlines()
    assert all(w.startswith("volcano-elastic plan: warning: ") for w in warnings)
    assert len(warnings) == 5
    for fragment in ("ns/broken", "n9", "metadata.name", "lots", "not an object"):
        assert any(fragment in w for w in warnings), (fragment, warnings)


def _mangle(obj: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(obj))
    cur = out
    parts = where.split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if isinstance(cur, list) else cur[p]
    if isinstance(cur, list):
        cur[int(parts[-1])] = value
    else:
        cur[parts[-1]] = value
    return out


POD = elastic_job("ns", "m", min_r=1, max_r=2, nodes=["n0"], running=2)[1]
PG = gang("ns", "x", members=1, gpus=1)[0]
NODE = node("n0")


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(_mangle(POD, "spec.containers", "nope"), id="pod-containers-string"),
        pytest.param(_mangle(POD, "spec.containers.0.resources", []), id="pod-resources-list"),
        pytest.param(_mangle(POD, "spec.containers.0.resources.requests", "4"), id="pod-requests-string"),
        pytest.param(_mangle(POD, "spec.containers.0.env", [1]), id="pod-env-not-objects"),
        pytest.param(_mangle(POD, "status.conditions", ["x"]), id="pod-conditions-strings"),
        pytest.param(_mangle(POD, "status", "Running"), id="pod-status-string"),
        pytest.param(_mangle(POD, "spec.tolerations", ["x"]), id="pod-tolerations-strings"),
        pytest.param(_mangle(POD, "spec.schedulingGates", "gate"), id="pod-gates-string"),
        pytest.param(_mangle(POD, "metadata.labels", ["a"]), id="pod-labels-list"),
        pytest.param(_mangle(NODE, "spec.taints", ["x"]), id="node-taints-strings"),
        pytest.param(_mangle(NODE, "status.conditions", [None]), id="node-conditions-null"),
        pytest.param(_mangle(PG, "spec.minTaskMember", [1]), id="pg-min-task-member-list"),
        pytest.param(_mangle(PG, "spec", "x"), id="pg-spec-string"),
        pytest.param({"kind": "Queue", "metadata": {"name": "q"}, "spec": {"guarantee": "x"}},
                     id="queue-guarantee-str"),
        pytest.param({"kind": "Queue", "metadata": {"name": "q"}, "spec": []}, id="queue-spec-list"),
        pytest.param({"kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ns"},
                      "spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": []}}}}}, id="job-template-list"),
        pytest.param({"kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ns"},
                      "spec": {"runPolicy": "x"}}, id="job-runpolicy-string"),
    ],
)
def test_malformed_objects_are_skipped_not_fatal(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 obj: dict[str, Any]) -> None:
    snap = write(tmp_path / "s.json", {"kind": "List", "items": [*CLUSTER["items"], obj]})
    code, out, err = run(capsys, "--from", snap, "--now", ts(NOW), "-o", "json")
    assert code == 0, err
    json.loads(out)
    assert all(line.startswith("volcano-elastic plan: warning: ") for line in err.strip().splitlines() if line)


def test_overlapping_dumps_count_each_object_once(capsys: pytest.CaptureFixture[str], snapshot: str) -> None:
    _, one, _ = run(capsys, "--from", snapshot, "--now", ts(NOW), "-o", "json")
    code, twice, err = run(capsys, "--from", snapshot, "--from", snapshot, "--now", ts(NOW), "-o", "json")
    assert code == 0 and err == "" and json.loads(twice) == json.loads(one)


def test_table_output_says_why_a_fitting_growth_is_not_worth_a_restart(capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled scale-up example: resnet grows 2 -> 8; gpt could grow 3 -> 4 on the GPUs left, but
    +33 % is below minScaleUpGain 1: `plan` says so instead of staying silent about gpt."""
    example = Path(__file__).resolve().parents[2] / "examples" / "plan" / "scale-up-into-idle-gpus.json"
    code, out, _ = run(capsys, "--from", str(example), "--now", "2026-01-01T13:00:00Z")
    assert code == 0
    holds = [line for line in out.splitlines() if line.startswith("HOLD")]
    assert len(holds) == 1 and "job team-nlp/gpt stays at 3 of max 4 workers: 4 fit now" in holds[0]
    assert "+33% is below minScaleUpGain 1" in holds[0]


def _held_example(tmp_path: Path, **annotations: str) -> str:
    """The bundled scale-up example with resnet's PodGroup annotated: 6 of its workers fit, as there."""
    example = Path(__file__).resolve().parents[2] / "examples" / "plan" / "scale-up-into-idle-gpus.json"
    doc = json.loads(example.read_text())
    (pg,) = [o for o in doc["items"] if o["kind"] == "PodGroup" and o["metadata"]["name"] == "resnet"]
    pg["metadata"].setdefault("annotations", {}).update(annotations)
    return write(tmp_path / "held.json", doc)


@pytest.mark.parametrize(("annotations", "why", "code", "until"), [
    pytest.param({"volcano-elastic.io/last-scale-time": "2026-01-01T12:56:00Z",
                  "volcano-elastic.io/last-scale-direction": "down"},
                 "snoozed until 2026-01-01T13:01:00Z", "Snoozed", "2026-01-01T13:01:00Z", id="shrunk-240s-ago"),
    pytest.param({"volcano-elastic.io/last-scale-time": "2026-01-01T12:56:00Z",
                  "volcano-elastic.io/last-scale-direction": "up"},
                 "in cooldown until 2026-01-01T13:01:00Z", "Cooldown", "2026-01-01T13:01:00Z", id="grown-240s-ago"),
    pytest.param({"volcano-elastic.io/last-checkpoint-time": "2026-01-01T12:00:00Z"},
                 "its last checkpoint, at 2026-01-01T12:00:00Z, is older than scaleUpAfterCheckpointSeconds 600",
                 "CheckpointTooOld", None, id="old-checkpoint"),
])
def test_growth_held_back_is_explained_not_called_unfitting(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            annotations: dict[str, str], why: str, code: str,
                                                            until: str | None) -> None:
    """Review of issue 19: resnet's 6 workers fit, yet `plan` said "nothing gated fits now"."""
    snap = _held_example(tmp_path, **annotations)
    rc, out, _ = run(capsys, "--from", snap, "--now", "2026-01-01T13:00:00Z")
    lines = out.splitlines()
    assert rc == 0 and not any(line.startswith("GROW      team-") for line in lines), out
    holds = [line for line in lines if line.startswith("HOLD")]
    assert len(holds) == 2 and holds[0].split()[1] == "team-vision/resnet"
    assert "job team-vision/resnet stays at 2 of max 16 workers: " in holds[0]
    assert why in holds[0], holds[0]
    assert "nothing gated fits now" not in out
    assert lines[-1].split(None, 2) == ["GROW", "none", "HOLD says why for the job(s) it names; no other gated pod "
                                        "fits now (on the nodes and in its queue's share)"]
    rc, out, _ = run(capsys, "--from", snap, "--now", "2026-01-01T13:00:00Z", "-o", "json")
    doc = json.loads(out)
    assert doc["gateReleases"] == [] and doc["scaleUpBlockedBy"] == []
    assert [n["job"] for n in doc["notes"]] == ["team-vision/resnet", "team-nlp/gpt"]
    assert (doc["notes"][0]["reason"], doc["notes"][0]["until"]) == (code, until)
    assert [set(n) for n in doc["notes"]] == [{"job", "reason", "until", "message"}] * 2
    for note, line in zip(doc["notes"], holds, strict=True):
        assert line.endswith(note["message"]) and note["reason"] in line


def test_nothing_fits_is_said_when_it_is_the_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snap = write(tmp_path / "s.json", dump(node("n0", gpus=3), elastic_job("ns", "j", min_r=2, max_r=6,
                                                                           nodes=["n0"], running=3)))
    code, out, _ = run(capsys, "--from", snap, "--now", ts(NOW))
    assert code == 0 and "HOLD" not in out
    assert out.splitlines()[-1].split(None, 2) == ["GROW", "none", "nothing gated fits now (on the nodes and in its "
                                                   "queue's share)"]


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path: Path) -> None:
    """`plan ... | head -2`: the reader closes the pipe; plan stops quietly, as SIGPIPE would stop it."""
    import subprocess
    import sys

    # 2,500 pods released on one roomy node: -o wide prints a line each, more than a pipe holds (64 KiB)
    snap = write(tmp_path / "big.json", dump(node("n0", gpus=3000, cpu="40000", memory="1000Ti", pods=5000),
                                            elastic_job("ns", "big", min_r=1, max_r=2500, nodes=["n0"], running=1)))
    proc = subprocess.Popen([sys.executable, "-m", "elastic_controller", "plan", "--from", snap, "--now", ts(NOW),
                             "-o", "wide"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    head = [proc.stdout.readline() for _ in range(2)]
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert head[0].split()[:2] == [b"ACTION", b"OBJECT"] and err == ""


@pytest.mark.parametrize(("names", "ordered"), [
    (["w-10", "w-2", "w-1"], ["w-1", "w-2", "w-10"]),
    (["ns2/a-1", "ns/b-10", "ns/b-9"], ["ns/b-9", "ns/b-10", "ns2/a-1"]),
    (["a10b2", "a10b10", "a9"], ["a9", "a10b2", "a10b10"]),
])
def test_names_sort_as_people_read_them(names: list[str], ordered: list[str]) -> None:
    from elastic_controller.cli.common import natural_sorted

    assert natural_sorted(names) == ordered


def test_a_hold_note_is_its_text_and_keeps_its_fields_when_copied() -> None:
    import copy
    import pickle

    from elastic_controller.policy.decisions import HoldNote, HoldReason

    note = HoldNote("job ns/a stays at 2 ...", "ns/a", HoldReason.COOLDOWN, NOW)
    assert note == "job ns/a stays at 2 ..." and json.dumps([note]) == '["job ns/a stays at 2 ..."]'
    for twin in (copy.deepcopy(note), pickle.loads(pickle.dumps(note))):
        assert (twin, twin.job, twin.reason, twin.until) == (note, "ns/a", "Cooldown", NOW)


def warnings_of(err: str) -> list[str]:
    prefix = "volcano-elastic plan: warning: "
    assert all(line.startswith(prefix) for line in err.splitlines()), err
    return [line[len(prefix):] for line in err.splitlines()]


def test_no_warning_on_a_sound_dump(capsys: pytest.CaptureFixture[str], snapshot: str) -> None:
    code, _, err = run(capsys, "--from", snapshot, "--now", ts(NOW))
    assert code == 0 and err == ""


@pytest.mark.parametrize(("now", "fragment"), [
    ("2026-03-01T00:00:00Z", "--now 2026-03-01T00:00:00Z is 58 day(s) after the newest time in the dump"),
    ("2025-06-01T00:00:00Z", "--now 2025-06-01T00:00:00Z is 214 day(s) before the oldest time in the dump"),
])
def test_a_now_far_from_the_dump_is_warned_about(capsys: pytest.CaptureFixture[str], now: str, fragment: str) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "plan" / "scale-down-for-gang.json"
    code, _, err = run(capsys, "--from", str(example), "--now", now)
    (warning,) = warnings_of(err)
    assert code == 0 and warning.startswith(fragment), warning
    code, _, err = run(capsys, "--from", str(example))  # the clock: the bundled examples are from 2026-01-01
    assert code == 0 and warnings_of(err)[0].startswith("now (") and "no --now" in err
    code, _, err = run(capsys, "--from", str(example), "--now", "2026-01-01T13:00:00Z")
    assert code == 0 and err == ""


def test_a_dump_without_nodes_or_podgroups_is_warned_about(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    no_pg = [o for o in CLUSTER["items"] if o["kind"] not in ("Node", "PodGroup")]
    snap = write(tmp_path / "s.json", {"kind": "List", "items": no_pg})
    code, _, err = run(capsys, "--from", snap, "--now", ts(NOW))
    assert code == 0 and warnings_of(err) == [
        "the dump has no Nodes: nothing fits anywhere (dump with kubectl get nodes,pods,podgroups,queues,"
        "priorityclasses,pytorchjobs -A -o json)",
        "2 job(s) have no PodGroup in the dump (ns/g, ns/v): they are planned as if they did not exist (include "
        "podgroups in the dump; the controller creates one per job)"]


def test_a_config_queue_no_queue_has_is_warned_about(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "plan" / "scale-down-for-gang.json"
    cfg = write(tmp_path / "c.yaml", "queues: {visoin: {cooldownSeconds: 60}, nlp: {cooldownSeconds: 60}}\n")
    code, _, err = run(capsys, "--from", str(example), "--now", "2026-01-01T13:00:00Z", "--config", cfg)
    assert code == 0 and warnings_of(err) == [
        "the config's queues visoin match no Queue in the dump (queues: nlp, vision): their policy applies to "
        "nothing; a typo?"]
