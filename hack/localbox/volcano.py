"""Volcano: the scheduler (with a named hack/volcano-scheduler-<name>.conf or a file) and the
controller manager (queues, PodGroups, GC), and the wait for the `default` queue."""

from __future__ import annotations

import re
import time
from pathlib import Path

from . import paths
from .component import BoxLike, Component, Ports, Spec, http_ready
from .kube import Kube
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


def scheduler(box_dir: Path, kubeconfig: Path, conf: Path, ports: Ports) -> Component:
    return Component("vc-scheduler", (
        str(paths.binary("vc-scheduler")), f"--kubeconfig={kubeconfig}", f"--scheduler-conf={conf}",
        "--leader-elect=false", "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{ports['vc_scheduler_healthz']}",
        f"--listen-address=127.0.0.1:{ports['vc_scheduler_metrics']}", "--enable-metrics",
        "--schedule-period=500ms", f"--cache-dump-dir={box_dir / 'tmp'}",
        "--logtostderr", "-v=3",
    ), http_ready(f"http://127.0.0.1:{ports['vc_scheduler_healthz']}/healthz"))


def controller_manager(kubeconfig: Path, ports: Ports) -> Component:
    return Component("vc-controller-manager", (
        str(paths.binary("vc-controller-manager")), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
        f"--controllers={VOLCANO_CONTROLLERS}", "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{ports['vc_cm_healthz']}",
        f"--listen-address=127.0.0.1:{ports['vc_cm_metrics']}",
        "--logtostderr", "-v=2",
    ), http_ready(f"http://127.0.0.1:{ports['vc_cm_healthz']}/healthz"))


def specs(box_dir: Path, kubeconfig: Path, conf: Path) -> list[Spec]:
    """vc-scheduler (with ``conf``) and vc-controller-manager."""
    return [Spec("vc-scheduler", ("vc_scheduler_healthz", "vc_scheduler_metrics"),
                 lambda ports: scheduler(box_dir, kubeconfig, conf, ports)),
            Spec("vc-controller-manager", ("vc_cm_healthz", "vc_cm_metrics"),
                 lambda ports: controller_manager(kubeconfig, ports))]


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
