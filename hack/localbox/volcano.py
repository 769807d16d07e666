"""Volcano: the scheduler (with a named hack/volcano-scheduler-<name>.conf or a file) and the
controller manager (queues, PodGroups, GC), and the wait for the `default` queue."""

from __future__ import annotations

import re
import time
from pathlib import Path

from . import paths
from .component import BoxLike, Started
from .kube import Kube, http_ok
from .procs import BoxError, log_tail

VOLCANO_CONTROLLERS = "queue-controller,pg-controller,gc-controller"


def scheduler_conf_names() -> list[str]:
    """The named Volcano scheduler configurations: hack/volcano-scheduler-<name>.conf."""
    return sorted(f.name[len("volcano-scheduler-"):-len(".conf")]
                  for f in paths.HACK_DIR.glob("volcano-scheduler-*.conf"))


def version_tuple(v: str) -> tuple[int, ...]:
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", v)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def scheduler_conf(box: BoxLike) -> Path:
    """Copy the configuration --volcano-conf names into the box; refuse actions that the built
    Volcano does not have."""
    v = box.opts.volcano_conf
    named = paths.HACK_DIR / f"volcano-scheduler-{v}.conf"  # ours, native, gang-native, capacity, ...
    src = named if "/" not in v and named.is_file() else Path(v)
    if not src.is_file():
        raise BoxError(f"Volcano scheduler configuration {v!r} not found ({src}); "
                       f"use one of {', '.join(scheduler_conf_names())} or a file")
    text = src.read_text()
    volcano = paths.versions().get("VOLCANO_VERSION", "")
    m = re.search(r"^actions:\s*\"?([^\"\n]*)", text, re.M)
    actions = {a.strip() for a in (m.group(1) if m else "").split(",")}
    gang = sorted(actions & {"gangpreempt", "gangreclaim"})
    if gang and version_tuple(volcano) < (1, 15, 0):
        raise BoxError(f"Volcano scheduler configuration {v!r} uses {', '.join(gang)}, which Volcano "
                       f"{volcano} does not have (they came with v1.15); unset VOLCANO_VERSION")
    dst = box.dir / "volcano-scheduler.conf"
    dst.write_text(text)
    return dst


def start(box: BoxLike, conf: Path) -> Started:
    """Start vc-scheduler (with `conf`) and vc-controller-manager in the background."""
    b = paths.binary
    kc = str(box.kubeconfig)
    started: Started = {}
    t = time.monotonic()
    box._start("vc-scheduler", lambda: [
        str(b("vc-scheduler")), f"--kubeconfig={kc}", f"--scheduler-conf={conf}",
        "--leader-elect=false", "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{box.ports['vc_scheduler_healthz']}",
        f"--listen-address=127.0.0.1:{box.ports['vc_scheduler_metrics']}", "--enable-metrics",
        "--schedule-period=500ms", f"--cache-dump-dir={box.dir / 'tmp'}",
        "--logtostderr", "-v=3",
    ], lambda: True, port_keys=("vc_scheduler_healthz", "vc_scheduler_metrics"), wait=False)
    started["vc-scheduler"] = (t, lambda: http_ok(
        f"http://127.0.0.1:{box.ports['vc_scheduler_healthz']}/healthz"))

    t = time.monotonic()
    box._start("vc-controller-manager", lambda: [
        str(b("vc-controller-manager")), f"--kubeconfig={kc}", "--leader-elect=false",
        f"--controllers={VOLCANO_CONTROLLERS}", "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{box.ports['vc_cm_healthz']}",
        f"--listen-address=127.0.0.1:{box.ports['vc_cm_metrics']}",
        "--logtostderr", "-v=2",
    ], lambda: True, port_keys=("vc_cm_healthz", "vc_cm_metrics"), wait=False)
    started["vc-controller-manager"] = (t, lambda: http_ok(
        f"http://127.0.0.1:{box.ports['vc_cm_healthz']}/healthz"))
    return started


def default_queue_open(kube: Kube) -> bool:
    q = kube.get("/apis/scheduling.volcano.sh/v1beta1/queues/default")
    return bool(q.get("status", {}).get("state") == "Open")


def wait_default_queue(box: BoxLike) -> None:
    """Wait until vc-controller-manager has opened the `default` queue (the logs of both
    Volcano components in the error when it does not)."""
    t = time.monotonic()
    try:
        box.kube.wait_for("Volcano queue 'default' to be Open", lambda: default_queue_open(box.kube),
                          box.opts.timeout)
    except TimeoutError as e:
        raise BoxError(f"{e}\nvc-scheduler log:\n{log_tail(box.procs['vc-scheduler'].log, 15)}\n"
                       f"vc-controller-manager log:\n"
                       f"{log_tail(box.procs['vc-controller-manager'].log, 15)}") from None
    box.say(f"queue 'default' Open in {time.monotonic() - t:.1f}s")
