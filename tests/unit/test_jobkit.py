"""The job kit (jobkit/, module volcano_elastic_job): what training code calls.

record_checkpoint against a fake API server on 127.0.0.1; the notice and target against fake
downward-API files; the rendezvous hook against fake rendezvous states (torch is not needed)."""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from enum import IntFlag
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import volcano_elastic_job as kit
from volcano_elastic_job import rendezvous
from volcano_elastic_job.loop import AllReduceMax
from volcano_elastic_job.run import fix_std_from_str

KIT_SRC = Path(__file__).resolve().parents[2] / "jobkit" / "src" / "volcano_elastic_job"

# What the kubelet writes: Go-quoted values, its own keys, kubectl's last-applied JSON.
ANNOTATIONS = "\n".join([
    'kubernetes.io/config.seen="2026-11-26T10:00:00.123456789Z"',
    'kubectl.kubernetes.io/last-applied-configuration="{\\"apiVersion\\":\\"v1\\",\\"kind\\":\\"Pod\\"}\\n"',
    'volcano-elastic.io/evict-after="2026-11-26T10:05:00Z"',
    'volcano-elastic.io/evicted-for="team-a/gang"',
    'volcano-elastic.io/target-workers="3"',
    'note="tab\\there \\u00e9"',
])


@pytest.fixture()
def podinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "annotations"
    monkeypatch.setenv("VOLCANO_ELASTIC_PODINFO", str(path))
    return path


# ------------------------------------------------------------------ the downward-API file
def test_annotations_file_read_as_the_kubelet_writes_it(podinfo: Path) -> None:
    podinfo.write_text(ANNOTATIONS + "\n")
    got = kit.read_annotations()
    assert json.loads(got["kubectl.kubernetes.io/last-applied-configuration"]) == {"apiVersion": "v1", "kind": "Pod"}
    assert got["note"] == "tab\there \u00e9"
    assert kit.eviction_notice() == datetime(2026, 11, 26, 10, 5, tzinfo=UTC)
    assert kit.target_workers() == 3


def test_no_file_no_notice_no_target(podinfo: Path) -> None:
    assert not podinfo.exists()
    assert kit.read_annotations() == {}
    assert kit.eviction_notice() is None
    assert kit.target_workers() is None


def test_a_bad_line_is_skipped_and_a_bad_value_ignored(podinfo: Path, caplog: pytest.LogCaptureFixture) -> None:
    podinfo.write_text('broken line\nx="unterminated\nvolcano-elastic.io/evict-after="soon"\n'
                       'volcano-elastic.io/target-workers="0"\ny="ok"\n')
    assert kit.read_annotations() == {"volcano-elastic.io/evict-after": "soon",
                                      "volcano-elastic.io/target-workers": "0", "y": "ok"}
    with caplog.at_level(logging.WARNING, logger="volcano_elastic_job"):
        assert kit.eviction_notice() is None
    assert "unreadable" in caplog.text
    assert kit.target_workers() is None  # 0 is no worker count


def test_offsets_are_read_as_utc(tmp_path: Path) -> None:
    path = tmp_path / "a"
    path.write_text('volcano-elastic.io/evict-after="2026-11-26T12:05:00+02:00"\n')
    assert kit.eviction_notice(str(path)) == datetime(2026, 11, 26, 10, 5, tzinfo=UTC)


# ------------------------------------------------------------------ record_checkpoint
class FakeAPI(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]
    status = 200

    def do_PATCH(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
        payload = b'{"kind":"Pod"}' if self.status == 200 else b'{"kind":"Status","code":403}'
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def api() -> Iterator[tuple[str, type[FakeAPI]]]:
    handler = type("Handler", (FakeAPI,), {"requests": [], "status": 200})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


@pytest.fixture()
def sa_dir(tmp_path: Path) -> Path:
    d = tmp_path / "sa"
    d.mkdir()
    (d / "token").write_text("tok-1\n")
    (d / "namespace").write_text("team-a")
    return d


def test_record_checkpoint_patches_this_pod(api: tuple[str, type[FakeAPI]], sa_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    url, handler = api
    monkeypatch.setenv("POD_NAME", "train-worker-2")
    when = datetime(2026, 11, 26, 10, 0, 7, 900000, tzinfo=UTC)
    assert kit.record_checkpoint(when, api_url=url, sa_dir=str(sa_dir)) is True
    (req,) = handler.requests
    assert req["path"] == "/api/v1/namespaces/team-a/pods/train-worker-2"
    assert req["headers"]["Authorization"] == "Bearer tok-1"
    assert req["headers"]["Content-Type"] == "application/merge-patch+json"
    assert req["body"] == {"metadata": {"annotations": {kit.LAST_CHECKPOINT_TIME: "2026-11-26T10:00:07Z"}}}


def test_record_checkpoint_rereads_the_token_and_falls_back_to_the_hostname(
        api: tuple[str, type[FakeAPI]], sa_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, handler = api
    monkeypatch.delenv("POD_NAME", raising=False)
    monkeypatch.setenv("HOSTNAME", "train-worker-0")
    assert kit.record_checkpoint(api_url=url, sa_dir=str(sa_dir))
    (sa_dir / "token").write_text("tok-2")  # the kubelet rotated it
    naive = datetime(2026, 11, 26, 10, 0, 0)  # naive: taken as UTC
    assert kit.record_checkpoint(naive, api_url=url, sa_dir=str(sa_dir))
    assert [r["headers"]["Authorization"] for r in handler.requests] == ["Bearer tok-1", "Bearer tok-2"]
    assert handler.requests[0]["path"].endswith("/pods/train-worker-0")
    assert handler.requests[1]["body"]["metadata"]["annotations"][kit.LAST_CHECKPOINT_TIME] == "2026-11-26T10:00:00Z"


def test_record_checkpoint_logs_a_403_and_says_what_to_do(api: tuple[str, type[FakeAPI]], sa_dir: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    url, handler = api
    handler.status = 403
    with caplog.at_level(logging.WARNING, logger="volcano_elastic_job"):
        assert kit.record_checkpoint(pod="p", api_url=url, sa_dir=str(sa_dir)) is False
    assert "HTTP 403" in caplog.text and "ServiceAccount" in caplog.text
    assert len(handler.requests) == 1


@pytest.mark.parametrize("case", ["no-server", "no-token", "not-in-a-pod"])
def test_record_checkpoint_never_raises(case: str, sa_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    url: str | None = "http://127.0.0.1:9"  # discard port: connection refused
    if case == "no-token":
        (sa_dir / "token").unlink()
    if case == "not-in-a-pod":
        url = None
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with caplog.at_level(logging.WARNING, logger="volcano_elastic_job"):
        assert kit.record_checkpoint(pod="p", api_url=url, sa_dir=str(sa_dir), timeout=2) is False
    assert "not recorded" in caplog.text


def test_the_in_cluster_url_comes_from_the_kubelets_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from volcano_elastic_job.checkpoint import api_server
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    assert api_server() == "https://[fd00::1]:6443"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    assert api_server() == "https://10.96.0.1:443"


# ------------------------------------------------------------------ NoticeWatch
def test_every_rank_checkpoints_at_the_same_step_with_one_collective_every_n_steps() -> None:
    notice = datetime(2026, 11, 26, 10, 5, tzinfo=UTC)
    seen: dict[int, datetime | None] = {0: None, 1: None}  # rank -> its pod's notice
    flags: dict[int, int] = {}

    def reduce_for(rank: int) -> AllReduceMax:
        def reduce(flag: int) -> int:  # the ranks run in lockstep here: rank 1 calls second
            flags[rank] = flag
            return max(flags.values())
        return reduce

    watches = {r: kit.NoticeWatch(every=5, all_reduce_max=reduce_for(r), read=lambda r=r: seen[r])
               for r in (1, 0)}
    fired: dict[int, list[int]] = {0: [], 1: []}
    for step in range(1, 31):
        if step == 7:
            seen[1] = notice  # only rank 1's pod is the victim
        if step == 22:
            seen[1] = notice + timedelta(minutes=1)  # a new notice
        flags.clear()
        for r in (1, 0):  # rank 1 flags first, so rank 0's max sees it
            if watches[r].checkpoint_now(step):
                fired[r].append(step)
    assert fired[1] == [10, 25]  # the next multiple of 5 after each notice, once each
    assert fired[0] == fired[1]
    assert watches[0].collectives == watches[1].collectives == 6  # steps 5, 10, ... 30


def test_a_single_process_watch_needs_no_collective() -> None:
    notice: list[datetime | None] = [None]
    watch = kit.NoticeWatch(every=1, read=lambda: notice[0])
    assert not watch.checkpoint_now(1)
    notice[0] = datetime(2026, 1, 1, tzinfo=UTC)
    assert watch.pending() == notice[0]
    assert watch.checkpoint_now(2)
    assert not watch.checkpoint_now(3)  # answered
    assert watch.pending() is None and watch.collectives == 0
    with pytest.raises(ValueError, match="at least 1"):
        kit.NoticeWatch(every=0)


def test_the_victim_rank_holds_after_its_notice_checkpoint_until_the_notice_goes() -> None:
    notice = datetime(2026, 11, 26, 10, 5, tzinfo=UTC)
    seen: dict[int, datetime | None] = {0: None, 1: notice}  # rank 1's pod is the victim
    flags: dict[int, int] = {}

    def reduce(flag: int) -> int:
        flags[len(flags)] = flag
        return max(flags.values())

    clock = [notice - timedelta(seconds=20)]
    slept: list[float] = []

    def sleep(s: float) -> None:  # the agent withdraws the notice after 3 s
        slept.append(s)
        clock[0] += timedelta(seconds=s)
        if len(slept) == 6:
            seen[1] = None

    watches = {r: kit.NoticeWatch(every=1, all_reduce_max=reduce, read=lambda r=r: seen[r]) for r in (1, 0)}
    assert watches[1].checkpoint_now(1) and watches[0].checkpoint_now(1)
    assert watches[1].victim and not watches[0].victim
    assert watches[0].hold(sleep=sleep, now=lambda: clock[0]) == 0.0  # not the victim: its collective waits
    assert watches[1].hold(sleep=sleep, now=lambda: clock[0]) == pytest.approx(3.0)
    assert watches[1].hold(sleep=sleep, now=lambda: clock[0]) == 0.0  # once per notice checkpoint
    # No eviction and no withdrawal: training goes on `grace` seconds after the notice's time.
    seen[1] = notice + timedelta(minutes=1)
    clock[0] = notice
    flags.clear()
    assert watches[1].checkpoint_now(2)
    assert watches[1].hold(grace=10, sleep=sleep, now=lambda: clock[0]) == pytest.approx(70.5)
    # A checkpoint for the interval (no notice) holds nothing.
    flags.clear()
    assert not watches[1].checkpoint_now(3)
    assert watches[1].hold(sleep=sleep, now=lambda: clock[0]) == 0.0


def test_the_default_watch_reads_the_downward_api_file(podinfo: Path) -> None:
    watch = kit.NoticeWatch(every=2)
    assert not watch.checkpoint_now(2)
    podinfo.write_text(ANNOTATIONS)
    assert not watch.checkpoint_now(3)  # not a step to look at
    assert watch.checkpoint_now(4)


# ------------------------------------------------------------------ the world
def test_world_from_the_environment_and_scaling(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    assert (kit.world_size(), kit.rank(), kit.local_rank(), kit.restart_count()) == (1, 0, 0, 0)
    monkeypatch.setenv("WORLD_SIZE", "6")
    monkeypatch.setenv("RANK", "4")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    assert (kit.world_size(), kit.rank(), kit.restart_count()) == (6, 4, 2)
    assert kit.scale_lr(0.1, 4) == pytest.approx(0.15)
    assert kit.scale_lr(0.1, 4, world=2) == pytest.approx(0.05)
    assert kit.split_batch(1200) == 200
    with pytest.raises(ValueError, match="worker-counts"):
        kit.split_batch(1000)
    with pytest.raises(ValueError, match="at least 1"):
        kit.scale_lr(0.1, 0)
    monkeypatch.setenv("WORLD_SIZE", "six")
    with pytest.raises(ValueError, match="WORLD_SIZE='six'"):
        kit.world_size()


# ------------------------------------------------------------------ the rendezvous
def state(participants: int, deadline: datetime | None, *, complete: bool = False) -> SimpleNamespace:
    return SimpleNamespace(participants={f"n{i}": i for i in range(participants)}, deadline=deadline,
                           complete=complete, closed=False)


@pytest.mark.parametrize("aware", [False, True])  # torch < 2.4 keeps naive UTC, later aware
def test_a_round_completes_when_the_target_has_joined(aware: bool) -> None:
    now = datetime.now(UTC)
    later = (now if aware else now.replace(tzinfo=None)) + timedelta(seconds=30)
    s = state(2, later)
    assert not rendezvous.complete_at_target(s, 2, 4, 3)  # 2 of 3: keep waiting
    assert s.deadline == later
    s = state(3, later)
    assert rendezvous.complete_at_target(s, 2, 4, 3)
    assert s.deadline < (now if aware else now.replace(tzinfo=None)) + timedelta(seconds=1)
    assert not rendezvous.complete_at_target(s, 2, 4, 3)  # already due


def test_no_target_or_a_finished_round_is_left_to_c10d() -> None:
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=30)
    for s, target in [(state(3, later), None), (state(3, None), 3), (state(3, later, complete=True), 3)]:
        assert not rendezvous.complete_at_target(s, 2, 4, target)
    assert rendezvous.round_target(1, 2, 4) == 2  # below min: min
    assert rendezvous.round_target(9, 2, 4) == 4  # above max: max (c10d completes there anyway)
    assert rendezvous.round_target(None, 2, 4) is None


def test_wrap_checks_after_every_sync() -> None:
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=30)
    holder = SimpleNamespace(state=state(2, later), syncs=0)

    def sync() -> bool:
        holder.syncs += 1
        holder.state.participants[f"n{holder.syncs + 10}"] = 0  # one more node joined
        return True

    holder.sync = sync
    handler = SimpleNamespace(_state_holder=holder, _settings=SimpleNamespace(min_nodes=2, max_nodes=4))
    targets = [3]
    assert rendezvous.wrap(handler, read_target=lambda: targets[0]) is handler
    assert handler._state_holder.sync() is True  # the original's result
    assert holder.syncs == 1 and holder.state.deadline < later
    rendezvous._handlers.remove(handler)


def test_wrap_leaves_an_unknown_handler_alone(caplog: pytest.LogCaptureFixture) -> None:
    handler = SimpleNamespace()
    with caplog.at_level(logging.WARNING, logger="volcano_elastic_job"):
        assert rendezvous.wrap(handler) is handler
    assert "plain c10d" in caplog.text


def test_launcher_reads_redirects_as_torch_meant() -> None:
    class Std(IntFlag):  # torch 1.13's, as Python >= 3.11 runs it
        NONE = 0
        OUT = 1
        ERR = 2
        ALL = OUT | ERR

        @classmethod
        def from_str(cls, vm: str) -> Any:
            for s in cls:
                if s == int(vm):
                    return s
            return None

    broken = sys.version_info >= (3, 11)
    assert (Std.from_str("0") is None) == broken
    assert fix_std_from_str(Std) == broken
    if broken:
        assert Std.from_str("0") is Std.NONE and Std.from_str("3") is Std.ALL
        assert Std.from_str("0:3,1:1") == {0: Std.ALL, 1: Std.OUT}
        with pytest.raises(ValueError):
            Std.from_str("7")


# ------------------------------------------------------------------ standard library only
def test_the_kit_imports_only_the_standard_library() -> None:
    found: set[str] = set()
    for path in KIT_SRC.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    assert found, "no imports found: wrong directory?"
    assert {m for m in found if m not in sys.stdlib_module_names and m != "__future__"} == set()


@pytest.mark.parametrize(("default", "argv", "env", "want"), [
    (5, [], None, "1.0"),  # torch < 2.4: 5 s -> 1 s
    (0.1, [], None, None),  # torch 2.4+: already faster, left alone
    (5, ["--monitor_interval=3"], None, None),  # the user said so
    (5, ["--monitor-interval", "3"], None, None),
    (5, [], "2", "2"),
])
def test_launcher_looks_at_workers_every_second_where_torch_looks_every_five(
        default: float, argv: list[str], env: str | None, want: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from volcano_elastic_job.run import faster_monitor
    monkeypatch.setenv("PET_MONITOR_INTERVAL", env or "")  # recorded: restored after the test
    if env is None:
        monkeypatch.delenv("PET_MONITOR_INTERVAL")

    def get_args_parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()
        p.add_argument("--monitor_interval", type=float, default=default)
        return p

    assert faster_monitor(SimpleNamespace(get_args_parser=get_args_parser), argv) == (want == "1.0")
    assert os.environ.get("PET_MONITOR_INTERVAL") == want


def test_the_entry_point_returns_the_creator_as_torch_expects() -> None:
    """torch's registry (2.4+): ``handler_registry.register(ep.name, ep.load()())``."""
    import tomllib
    meta = tomllib.loads((KIT_SRC.parents[1] / "pyproject.toml").read_text())
    target = meta["project"]["entry-points"]["torchrun.handlers"]["volcano-c10d"]
    module, _, attr = target.partition(":")
    assert module == "volcano_elastic_job.rendezvous"
    creator = getattr(rendezvous, attr)()
    assert creator is rendezvous.create_handler


def test_the_handler_says_the_backend_it_was_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's registry refuses a handler whose get_backend() is not the requested name."""
    import importlib

    class Handler:
        _backend_name = "c10d"

        def get_backend(self) -> str:
            return self._backend_name

    fake = SimpleNamespace(_create_c10d_handler=lambda params: Handler())
    real_import = importlib.import_module
    monkeypatch.setattr(importlib, "import_module",
                        lambda name: fake if name.endswith("rendezvous.registry") else real_import(name))
    for asked in ("volcano-c10d", "c10d"):
        handler = rendezvous.create_handler(SimpleNamespace(backend=asked))
        assert handler.get_backend() == asked
