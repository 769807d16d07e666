"""The box's components are values (hack/localbox/component.py): each module's builder maps the ports
the runtime picked to a command line, files and a readiness check, without starting anything; the
runtime (Box.run) launches them, and rebuilds on other ports after a lost port race."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from hack.localbox import apiserver, etcd, kcm, kwok, ours, realnode, training_operator, volcano
from hack.localbox.box import Box
from hack.localbox.component import Component, Spec, always, http_ready
from hack.localbox.options import BoxOptions
from hack.localbox.procs import proc_alive

PORTS = {"etcd": 2379, "etcd_peer": 2380, "apiserver": 6443, "kcm": 10257, "vc_scheduler_healthz": 11251,
         "vc_scheduler_metrics": 18080, "vc_cm_healthz": 11252, "vc_cm_metrics": 18081, "kwok": 10247,
         "operator_webhook": 9443, "operator_metrics": 8080, "operator_probe": 8081, "coredns_health": 8053,
         "coredns_ready": 8181, "kube_scheduler": 10259}
BOX = Path("/boxes/b")


def built(spec: Spec) -> Component:
    missing = set(spec.ports) - set(PORTS)
    assert not missing, missing
    return spec.build(PORTS)


def flag(c: Component, name: str) -> str:
    """The value of ``--name=value`` or ``--name value`` in the component's command line."""
    argv = list(c.argv)
    for i, a in enumerate(argv):
        if a.startswith(f"{name}="):
            return a.split("=", 1)[1]
        if a == name:
            return argv[i + 1]
    raise AssertionError(f"{name} not in {argv}")


def test_etcd_listens_on_its_two_ports() -> None:
    c = built(etcd.spec(BOX / "etcd"))
    assert c.name == "etcd" and etcd.spec(BOX).ports == ("etcd", "etcd_peer")
    assert flag(c, "--listen-client-urls") == "http://127.0.0.1:2379"
    assert flag(c, "--initial-cluster") == "box=http://127.0.0.1:2380"
    assert flag(c, "--data-dir") == str(BOX / "etcd")


@pytest.mark.parametrize("real_nodes", [False, True])
def test_apiserver_uses_etcds_port_and_its_own(real_nodes: bool) -> None:
    c = built(apiserver.spec(BOX / "pki", real_nodes))
    assert flag(c, "--etcd-servers") == "http://127.0.0.1:2379"
    assert flag(c, "--secure-port") == "6443"
    assert flag(c, "--service-account-issuer") == "https://127.0.0.1:6443"
    assert flag(c, "--bind-address") == ("0.0.0.0" if real_nodes else "127.0.0.1")


def test_kcm_controllers_follow_real_nodes() -> None:
    kwok_only = built(kcm.spec(BOX, BOX / "kubeconfig", BOX / "pki", False))
    real = built(kcm.spec(BOX, BOX / "kubeconfig", BOX / "pki", True))
    assert flag(kwok_only, "--controllers") == kcm.KCM_CONTROLLERS
    assert "node-lifecycle-controller" in flag(real, "--controllers")
    assert "--node-monitor-period=2s" in real.argv and "--node-monitor-period=2s" not in kwok_only.argv
    assert flag(real, "--secure-port") == "10257"


def test_volcano_kwok_and_operator() -> None:
    sched, cm = (built(s) for s in volcano.specs(BOX, BOX / "kubeconfig", BOX / "sched.conf"))
    assert (sched.name, cm.name) == ("vc-scheduler", "vc-controller-manager")
    assert flag(sched, "--scheduler-conf") == str(BOX / "sched.conf")
    assert flag(cm, "--healthz-address") == "127.0.0.1:11252"
    k = kwok.component(BOX, BOX / "kubeconfig", BOX / "kwok.yaml", PORTS)
    assert flag(k, "--node-port") == "10247" and k.env == {"HOME": str(BOX)}
    calls: list[str] = []
    op = built(training_operator.spec(BOX, BOX / "kubeconfig", 8, lambda: calls.append("prepared")))
    assert flag(op, "--webhook-server-port") == "9443" and flag(op, "--controller-threads") == "8"
    assert flag(op, "--kube-api-qps") == "160" and op.env is not None and op.env["TMPDIR"] == str(BOX / "tmp")
    assert calls == []  # building starts nothing; the runtime calls prepare before the launch
    assert op.prepare is not None


def test_coredns_corefile_is_a_file_of_the_value() -> None:
    c = built(realnode.coredns_spec(BOX / "coredns", BOX / "kubeconfig"))
    (path, text), = c.files.items()
    assert path == BOX / "coredns" / "Corefile" and flag(c, "-conf") == str(path)
    assert "health 127.0.0.1:8053" in text and "ready 127.0.0.1:8181" in text and str(BOX / "kubeconfig") in text
    assert built(realnode.kube_scheduler_spec(BOX / "kubeconfig")).ready is always


@pytest.fixture
def server() -> Iterator[int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = {"/health": b'{"health":"true"}', "/healthz": b"ok"}.get(self.path, b"no")
            self.send_response(200 if body != b"no" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


def test_http_ready(server: int) -> None:
    assert http_ready(f"http://127.0.0.1:{server}/health", expect='"health":"true"')()
    assert not http_ready(f"http://127.0.0.1:{server}/health", expect="nope")()
    assert not http_ready(f"http://127.0.0.1:{server}/other")()


def test_the_runtime_picks_ports_writes_files_prepares_and_runs(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Box.run: fresh ports for the spec's keys, the builder called with them, its files written and
    prepare run before the process starts, and the process waited for through the value's check."""
    monkeypatch.setenv("VOLCANO_ELASTIC_CACHE", str(tmp_path / "cache"))
    box = Box(BoxOptions(name="unit", quiet=True, timeout=20))
    box.dir.mkdir(parents=True)
    seen: list[dict[str, int]] = []
    out = tmp_path / "out.txt"

    def build(ports: Mapping[str, int]) -> Component:
        seen.append(dict(ports))
        marker = tmp_path / "marker"
        return Component("echo", ("sh", "-c", f"cat {tmp_path / 'conf'} > {out}; sleep 30"),
                         lambda: out.exists() and out.read_text() == f"port {ports['p']}\n",
                         files={tmp_path / "conf": f"port {ports['p']}\n"},
                         prepare=lambda: marker.write_text("prepared"))

    try:
        box.run(Spec("echo", ("p",), build))
        assert len(seen) == 1 and seen[0]["p"] == box.ports["p"] > 0
        assert (tmp_path / "marker").read_text() == "prepared"
        assert out.read_text() == f"port {box.ports['p']}\n"
    finally:
        box.down(quiet=True)
    assert not box.dir.exists()


def test_a_kubelet_is_a_value_on_its_node_files_ready_on_its_healthz(server: int) -> None:
    d = BOX / "nodes" / "real-1"
    spec = realnode.kubelet_spec(1, d, "real-1")
    assert spec.name == "kubelet-1" and spec.ports == ()  # its ports are in its kubelet.yaml, kept on a restart
    c = spec.build({**PORTS, "kubelet_1_healthz": server})
    assert flag(c, "--config") == str(d / "kubelet.yaml") and flag(c, "--hostname-override") == "real-1"
    assert c.ready() and not spec.build({**PORTS, "kubelet_1_healthz": 1}).ready()


def test_a_kubelet_stops_and_starts_again_through_the_runtime(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """RealNodes.stop_kubelet / start_kubelet: Box.stop, then Box.run of the kubelet's value (its
    readiness waited for); a running kubelet is left alone."""
    monkeypatch.setenv("VOLCANO_ELASTIC_CACHE", str(tmp_path / "cache"))
    box = Box(BoxOptions(name="unit", quiet=True, timeout=20))
    box.dir.mkdir(parents=True)
    built: list[tuple[int, Path, str]] = []

    def kubelet(i: int, d: Path, name: str) -> Spec:
        built.append((i, d, name))
        return Spec(f"kubelet-{i}", (), lambda ports: Component(f"kubelet-{i}", ("sleep", "30"), always))

    monkeypatch.setattr(realnode, "kubelet_spec", kubelet)
    nodes = realnode.RealNodes(box, 2, 4)
    try:
        box.run(kubelet(1, nodes.node_dir(1), "real-1"))
        first = box.procs["kubelet-1"].pid
        nodes.start_kubelet(1)
        assert box.procs["kubelet-1"].pid == first and len(built) == 1  # running: left alone
        nodes.stop_kubelet(1)
        assert "kubelet-1" not in box.procs
        nodes.start_kubelet(1)
        assert built[-1] == (1, box.dir / "nodes" / "real-1", "real-1")
        assert box.procs["kubelet-1"].pid != first
    finally:
        box.down(quiet=True)


FAKE_KUBELET = """
import os, socket, sys, time
path = sys.argv[1]
try:
    os.unlink(path)  # the kubelet empties the device-plugin directory...
except FileNotFoundError:
    pass
time.sleep(0.5)
s = socket.socket(socket.AF_UNIX)
s.bind(path)  # ...then binds: a second kubelet in between makes this fail
s.listen()
time.sleep(30)
"""


def test_kubelets_start_one_at_a_time_on_the_shared_device_plugin_socket(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kubelet on a host binds the same device-plugin socket (a constant in the kubelet), after
    removing the one there: started together, one exits with "address already in use". The box
    starts the next kubelet only once the one before has bound it."""
    import sys

    monkeypatch.setenv("VOLCANO_ELASTIC_CACHE", str(tmp_path / "cache"))
    sock = tmp_path / "kubelet.sock"
    monkeypatch.setattr(realnode, "DEVICE_PLUGIN_SOCKET", sock)
    monkeypatch.setattr(realnode, "kubelet_spec", lambda i, d, name: Spec(
        f"kubelet-{i}", (), lambda ports: Component(f"kubelet-{i}", (sys.executable, "-c", FAKE_KUBELET, str(sock)),
                                                    always)))
    box = Box(BoxOptions(name="unit", quiet=True, timeout=20))
    box.dir.mkdir(parents=True)
    nodes = realnode.RealNodes(box, 2, 4)
    monkeypatch.setattr(nodes, "_kubelet_files", lambda i: nodes.node_dir(i))
    try:
        t = time.time()
        nodes._start_kubelet(0)
        assert realnode.device_socket_bound_since(t)
        nodes._start_kubelet(1)
        time.sleep(1.0)
        assert all(proc_alive(box.procs[f"kubelet-{i}"]) for i in range(2))
        assert not realnode.device_socket_bound_since(time.time() + 5)  # bound before then, not after
    finally:
        box.down(quiet=True)


def test_our_stack_command_lines_are_what_our_cli_accepts() -> None:
    """hack/localbox/ours.py: the webhook's and the controller's argv, as tests, demo and benches run them."""
    from elastic_controller.cli import build_parser

    web = ours.webhook_argv(Path("/c/tls.crt"), Path("/c/tls.key"), 8443, Path("/c/config.yaml"), workers=2)
    assert web[1:4] == ["-m", "elastic_controller", "webhook"]
    args = build_parser().parse_args(web[3:])
    assert (args.port, args.host, args.workers, args.config) == (8443, "127.0.0.1", 2, "/c/config.yaml")
    ctl = ours.controller_argv(Path("/b/kubeconfig"), Path("/c/config.yaml"), "ns", agent=False)
    args = build_parser().parse_args(ctl[3:])
    assert (args.kubeconfig, args.lease_namespace, args.http_port) == ("/b/kubeconfig", "ns", 0)
    assert "--no-agent" in ctl and "--no-agent" not in ours.controller_argv("/k", Path("/c"), "ns")


def test_our_webhook_configurations_route_what_the_shipped_ones_route() -> None:
    """The box's webhook configurations (by URL) select and match what manifests/base's (by Service) do."""
    from tests.harness.manifests import of_kind, render

    def routing(w: dict[str, object]) -> tuple[object, ...]:
        rules = [{k: v for k, v in r.items() if k != "scope"} for r in w["rules"]]  # type: ignore[attr-defined]
        return rules, w.get("objectSelector"), w["failurePolicy"], w.get("reinvocationPolicy")

    shipped = {o["kind"]: o["webhooks"][0] for o in of_kind(render("base"), "MutatingWebhookConfiguration",
                                                              "ValidatingWebhookConfiguration")}
    for obj in (ours.pod_webhook("n", 9443, "Q0E="), ours.job_webhook("n", 9443, "Q0E=")):
        (hook,) = obj["webhooks"]
        assert routing(hook) == routing(shipped[obj["kind"]]), obj["kind"]
        assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")
        assert hook["clientConfig"]["caBundle"] == "Q0E="
        assert hook["clientConfig"]["url"].endswith(shipped[obj["kind"]]["clientConfig"]["service"]["path"])


def test_the_operator_webhook_counts_as_served_once_its_validation_path_answers(tmp_path: Path) -> None:
    """The operator's /readyz answers before its webhook path is registered (a 404 there is a 500 on
    every PyTorchJob create): the box waits for the path itself, over TLS with the box's CA."""
    import ssl
    import types

    from hack.localbox import pki

    ca = pki.make_ca("training-operator-ca", key_kind="rsa")
    srv = pki.issue(ca, "localhost", ips=["127.0.0.1"])
    d = tmp_path / "pki" / "training-operator"
    ca.write(d / "ca.crt", d / "ca.key")
    srv.write(tmp_path / "tls.crt", tmp_path / "tls.key")
    registered: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200 if self.path in registered else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        box: Any = types.SimpleNamespace(ports={"operator_webhook": httpd.server_address[1]},
                                         pki_dir=tmp_path / "pki")
        assert not training_operator.webhook_served(box)  # listening, the path not yet registered
        registered.append("/validate-kubeflow-org-v1-pytorchjob")
        assert training_operator.webhook_served(box)
        box.ports["operator_webhook"] = 1  # nothing listens
        assert not training_operator.webhook_served(box)
    finally:
        httpd.shutdown()
