"""Shared pytest fixtures for tests that need a real control plane (hack/localbox).

Used by tests/integration/conftest.py (profile "core": etcd + kube-apiserver +
kube-controller-manager + CRDs) and tests/e2e/conftest.py (profile "full": + Volcano scheduler
and controllers, kwok GPU nodes, training operator). One box per profile per pytest session;
a fresh namespace per test.

Fixtures (a tier's conftest does `from tests.harness.boxfixtures import *`,
`box = box_fixture("core" | "full")` and `pytest_collection_modifyitems = mark_tier(__file__,
pytest.mark.TIER)`):

    box                 session  hack.localbox.Box of the tier's profile; .kubeconfig, .server,
                                 .ca_bundle, .kubectl(),
                                 .issue_serving_cert(), .spawn(), .webhook_client_config()
    kubeconfig          session  str path of the admin kubeconfig
    api_client          session  kubernetes.client.ApiClient for the box
    kube                session  factory: kube(client.CoreV1Api) -> API object on api_client
    namespace           function name of a fresh namespace (deleted after the test)
    box_process         function factory: box_process(name, argv, env=None) starts a process
                                 with KUBECONFIG set (own log in the box's logs dir) and
                                 stops it after the test; returns hack.localbox.box.Proc
    serving_cert        function (cert_path, key_path) signed by the box CA, IP SAN 127.0.0.1

Environment:
    VOLCANO_ELASTIC_TEST_BOX=NAME   use an already running box (hack/local-up.sh --name NAME)
                                    for every tier instead of starting one; never stopped
    VOLCANO_ELASTIC_KEEP_BOX=1      leave the session's boxes running (names are printed)
    VOLCANO_ELASTIC_CACHE           cache root (binaries, boxes), as for hack/
    VOLCANO_ELASTIC_BOX_PROFILE     force a profile (core | full) for every tier
    VOLCANO_ELASTIC_VOLCANO_CONF    ours (default) | native | NAME | FILE: Volcano scheduler config
                                    (a module using box_fixture(profile, NAME) gets its own box)
    VOLCANO_ELASTIC_BOX_NODES, VOLCANO_ELASTIC_BOX_GPUS_PER_NODE   kwok nodes (default 4 x 8)
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hack.localbox import Box, BoxError, BoxOptions, describe_missing, list_boxes, missing_binaries
from hack.localbox.box import PROFILES, Proc, proc_alive
from tests.harness.required import cannot_run

__all__ = [
    "api_client",
    "box_process",
    "kube",
    "kubeconfig",
    "namespace",
    "node_manifest",
    "serving_cert",
]

_BOXES: dict[str, Box] = {}
_DOWNS: dict[str, Callable[[], None]] = {}
_FAILED: dict[str, str] = {}


def _cleanup_stale_pytest_boxes() -> None:
    """Stop boxes left behind by pytest sessions that were killed (their owner pid is gone)."""
    for name in list_boxes():
        m = re.fullmatch(r"pytest-(\d+)-\w+", name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # owner still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        b = Box(name=name)
        if b.load():
            b.opts.quiet = True
            b.down(quiet=True)


def get_box(profile: str, config: pytest.Config, volcano_conf: str | None = None, real_nodes: int = 0) -> Box:
    """The session's box for `profile` (started on first use, stopped at session end). With
    `volcano_conf` (a name of hack/volcano-scheduler-NAME.conf), a box of its own running that
    Volcano scheduler configuration, whatever VOLCANO_ELASTIC_VOLCANO_CONF says."""
    existing = os.environ.get("VOLCANO_ELASTIC_TEST_BOX")
    if existing and volcano_conf is not None:
        pytest.skip(f"needs its own box with Volcano conf {volcano_conf!r} (VOLCANO_ELASTIC_TEST_BOX is set)")
    if existing:
        b = Box(name=existing)
        if not b.load():
            pytest.fail(f"VOLCANO_ELASTIC_TEST_BOX={existing}: no such box (start it with "
                        f"hack/local-up.sh --name {existing})")
        ok, why = b.healthy()
        if not ok:
            pytest.fail(f"VOLCANO_ELASTIC_TEST_BOX={existing} is not healthy: {why}")
        have = b.state.get("options", {}).get("profile")
        if profile == "full" and have != "full":
            pytest.fail(f"VOLCANO_ELASTIC_TEST_BOX={existing} runs profile {have!r}; this tier needs 'full'")
        return b
    key = profile if volcano_conf is None else f"{profile}-{volcano_conf}"
    images: list[str] = []
    if real_nodes:
        key += "-real"
        from hack.localbox import dockerfile, image, realnode

        if key not in _BOXES and key not in _FAILED:
            problems = realnode.host_problems()
            if problems:
                cannot_run("real", f"this host cannot run real nodes: {'; '.join(problems)}", config)
            try:
                images = [str(dockerfile.dockerfile_image(print)), str(image.train_image(print))]
            except image.ImageError as e:
                cannot_run("real", f"an image could not be built: {e}", config)
    if key in _BOXES:
        return _BOXES[key]
    if key in _FAILED:
        pytest.fail(_FAILED[key], pytrace=False)

    missing = missing_binaries(PROFILES[profile])
    if missing:
        tier = "real" if real_nodes else {"core": "integration"}.get(profile, "e2e")
        cannot_run(tier, f"control plane box not started: {describe_missing(missing)}", config)

    _cleanup_stale_pytest_boxes()
    name = f"pytest-{os.getpid()}-{key.replace('-', '')}"
    keep = os.environ.get("VOLCANO_ELASTIC_KEEP_BOX") == "1"
    env = os.environ.get
    opts = BoxOptions(name=name, profile=profile, keep_on_failure=keep,
                      nodes=int(env("VOLCANO_ELASTIC_BOX_NODES", "4")),
                      gpus_per_node=int(env("VOLCANO_ELASTIC_BOX_GPUS_PER_NODE", "8")),
                      volcano_conf=volcano_conf or env("VOLCANO_ELASTIC_VOLCANO_CONF", "ours"))
    if real_nodes:  # real nodes only: every pod really runs
        opts.nodes, opts.real_nodes, opts.real_node_images, opts.timeout = 0, real_nodes, images, 180.0
    b = Box(opts)
    t0 = time.monotonic()
    try:
        b.up()
    except BoxError as e:
        _FAILED[key] = f"the {key!r} control plane box failed to start: {e}"
        pytest.fail(_FAILED[key], pytrace=False)
    _BOXES[key] = b
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(f"[box] {profile} box {name} up in {time.monotonic() - t0:.1f}s: {b.kubeconfig}")

    def _down() -> None:
        if keep:
            print(f"\n[box] keeping box {name}: KUBECONFIG={b.kubeconfig} "
                  f"(stop: hack/local-down.sh --name {name})")
            return
        if _BOXES.get(key) is not b:
            return  # stopped already (release_unneeded_boxes)
        b.opts.quiet = True
        b.down(quiet=True)
        _BOXES.pop(key, None)

    if not keep:
        _DOWNS[key] = _down
    config.add_cleanup(_down)
    return b


KWOK_TIERS = ("e2e", "integration")  # the tiers whose tests use boxes without real nodes
_KWOK_TAIL: dict[str, Any] = {}  # "last": the session's last test in KWOK_TIERS (None: none); "seen": set up


def release_unneeded_boxes(item: pytest.Item) -> None:
    """``pytest_runtest_setup``: once no test left in the session is in a tier that uses boxes without
    real nodes, stop those boxes. Each keeps its apiserver, etcd, Volcano and kwok busy while idle, and
    the real tier that follows (torchrun on real kubelets, its stalls and waits measured) shares this
    machine's cores with them. A box is stopped only when no later test of this session can ask for it:
    at the set-up of a test after the last one of those tiers (whose own teardown is then done)."""
    if "last" not in _KWOK_TAIL:
        roots = [Path(item.config.rootpath) / "tests" / t for t in KWOK_TIERS]
        _KWOK_TAIL["last"] = next((it for it in reversed(item.session.items)
                                   if any(r in Path(it.path).parents for r in roots)), None)
    if item is _KWOK_TAIL["last"]:
        _KWOK_TAIL["seen"] = True
    elif _KWOK_TAIL.get("seen"):
        for key in [k for k in _DOWNS if not k.endswith("-real")]:
            _DOWNS.pop(key)()


def box_fixture(profile: str, volcano_conf: str | None = None, real_nodes: int = 0) -> Any:
    """Make the session-scoped `box` fixture of a tier: `box = box_fixture("core")` in its
    conftest. VOLCANO_ELASTIC_BOX_PROFILE overrides the profile. A test module that needs another
    Volcano scheduler configuration overrides it: `box = box_fixture("full", "capacity")` (one
    more box, shared by every module asking for that configuration)."""

    @pytest.fixture(scope="session")
    def box(request: pytest.FixtureRequest) -> Box:
        return get_box(os.environ.get("VOLCANO_ELASTIC_BOX_PROFILE") or profile, request.config, volcano_conf,
                       real_nodes)

    return box


def mark_tier(conftest: str, mark: pytest.MarkDecorator) -> Callable[[pytest.Config, list[pytest.Item]], None]:
    """A tier's ``pytest_collection_modifyitems`` hook: every test below the folder of ``conftest``
    (its ``__file__``) gets ``mark`` (``-m integration`` / ``-m e2e`` select a tier)."""
    here = Path(conftest).parent

    def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            if here in Path(item.path).parents:
                item.add_marker(mark)

    return pytest_collection_modifyitems


@pytest.fixture(scope="session")
def kubeconfig(box: Box) -> str:
    return str(box.kubeconfig)


@pytest.fixture(scope="session")
def api_client(kubeconfig: str) -> Iterator[Any]:
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    api = client.ApiClient(cfg)
    yield api
    api.close()


@pytest.fixture(scope="session")
def kube(api_client: Any) -> Callable[[type], Any]:
    """kube(client.CoreV1Api), kube(client.CustomObjectsApi), ... bound to the box."""

    def make(api_cls: type) -> Any:
        return api_cls(api_client)

    return make


def _ns_name(nodeid: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", nodeid.split("::")[-1].lower()).strip("-")[:40].strip("-")
    return f"t-{base}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kube: Callable[[type], Any]) -> Iterator[str]:
    """A fresh namespace for this test, deleted (in the background) afterwards."""
    from kubernetes import client

    core = kube(client.CoreV1Api)
    name = _ns_name(request.node.nodeid)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels={"volcano-elastic.io/test": "true"})))
    yield name
    if os.environ.get("VOLCANO_ELASTIC_KEEP_BOX") == "1":
        return
    try:
        core.delete_namespace(name, propagation_policy="Background")
    except client.ApiException as e:
        if e.status != 404:
            raise


# Lines of each of a failed test's own processes' logs printed with its report (the box, and so the
# logs, are gone when CI reports).
FAILED_LOG_LINES = 120


@pytest.fixture
def box_process(box: Box, request: pytest.FixtureRequest) -> Iterator[Callable[..., Proc]]:
    """Start our own processes against the box: box_process("agent", [sys.executable, "-m",
    "elastic_controller", "controller"]) -> Proc (pid, log). KUBECONFIG is set; the log is
    <box>/logs/<name>.log; the process group is stopped after the test. When the test failed, the
    last lines of each log are printed (pytest shows them under "Captured stdout teardown")."""
    started: list[Proc] = []
    failed_before = request.session.testsfailed

    def start(name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        proc = box.spawn(f"{name}-{uuid.uuid4().hex[:4]}", argv, env)
        started.append(proc)
        return proc

    yield start
    for proc in reversed(started):
        box.stop(proc.name)
    if request.session.testsfailed > failed_before:
        for proc in started:
            try:
                lines = Path(proc.log).read_text(errors="replace").splitlines()[-FAILED_LOG_LINES:]
            except OSError as exc:
                lines = [f"(no log: {exc})"]
            print(f"----- {proc.name}: the last {len(lines)} lines of {proc.log}")
            print("\n".join(lines))


@pytest.fixture
def serving_cert(box: Box, tmp_path: Path) -> tuple[Path, Path]:
    """(cert, key) for a local HTTPS server (e.g. our webhook) trusted by the API server via
    caBundle=box.ca_bundle, valid for https://127.0.0.1:PORT and https://localhost:PORT."""
    return box.issue_serving_cert(tmp_path)


def node_manifest(name: str, *, gpus: int = 8, cpu: str = "32", memory: str = "256Gi", pods: int = 110,
                  labels: dict[str, str] | None = None, kwok: bool = False, ready: bool = True) -> dict[str, Any]:
    """A Node for tests. kwok=True makes kwok (full box) manage it (Ready, pods Running);
    otherwise it is a static Node whose status says Ready (nothing taints it in the box)."""
    res = {"cpu": cpu, "memory": memory, "pods": str(pods), "nvidia.com/gpu": str(gpus)}
    status: dict[str, Any] = {"capacity": res, "allocatable": res}
    if not kwok:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False",
                                 "reason": "KubeletReady", "message": "static test node"}]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                     "annotations": {"kwok.x-k8s.io/node": "fake"} if kwok else {}},
        "spec": {}, "status": status,
    }


def proc_is_running(p: Proc) -> bool:
    return proc_alive(p)
