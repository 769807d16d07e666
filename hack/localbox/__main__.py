"""python -m hack.localbox up|down|status|env|paths  (run from the repository root)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from . import paths
from .box import PROFILES, Box, BoxError, BoxOptions, list_boxes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hack.localbox", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    default_name = os.environ.get("VOLCANO_ELASTIC_BOX", "default")

    up = sub.add_parser("up", help="start a box (or reuse a healthy one); prints the kubeconfig path last")
    up.add_argument("--name", default=default_name)
    up.add_argument("--profile", choices=sorted(PROFILES), default="full")
    up.add_argument("--nodes", type=int, default=4)
    up.add_argument("--gpus-per-node", type=int, default=8)
    up.add_argument("--node-cpu", default="32")
    up.add_argument("--node-memory", default="256Gi")
    up.add_argument("--volcano-conf", default="ours",
                    help="NAME of hack/volcano-scheduler-NAME.conf (ours, native, gang-native, capacity, "
                         "capacity-hierarchy) or a file")
    up.add_argument("--real-nodes", type=int, default=0, metavar="N",
                    help="also start N real nodes (kubelet + containerd each, pods really run; needs root: "
                         "hack/install-node-packages.sh installs the runtime); default 0")
    up.add_argument("--real-node-gpus", type=int, default=4, metavar="G",
                    help="fake nvidia.com/gpu each real node advertises (default 4)")
    up.add_argument("--real-node-image", action="append", default=[], metavar="OCI_ARCHIVE",
                    help="an OCI archive to import into every real node (repeatable; "
                         "hack/build-image.sh writes ours)")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds per component health wait")
    up.add_argument("--keep-on-failure", action="store_true",
                    default=os.environ.get("VOLCANO_ELASTIC_KEEP_BOX") == "1",
                    help="leave a box that failed to start running, for debugging (env VOLCANO_ELASTIC_KEEP_BOX=1)")

    down = sub.add_parser("down", help="stop a box and remove its files")
    down.add_argument("--name", default=default_name)
    down.add_argument("--all", action="store_true", help="stop every box under the cache dir")

    st = sub.add_parser("status", help="show boxes as JSON")
    st.add_argument("--name", default=None)

    sub.add_parser("paths", help="show the cache, binary and CRD directories")
    sub.add_parser("cache-key", help="print the cache key derived from hack/versions.env")

    a = ap.parse_args(argv)

    def _terminate(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")  # up() then stops what it started

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    try:
        if a.cmd == "up":
            if a.nodes < 0 or a.gpus_per_node < 0 or a.real_nodes < 0 or a.real_node_gpus < 0:
                ap.error("--nodes, --gpus-per-node, --real-nodes and --real-node-gpus must be >= 0")
            missing_images = [p for p in a.real_node_image if not os.path.isfile(p)]
            if missing_images:
                ap.error(f"--real-node-image: no such file: {', '.join(missing_images)}")
            opts = BoxOptions(name=a.name, profile=a.profile, nodes=a.nodes, gpus_per_node=a.gpus_per_node,
                              node_cpu=a.node_cpu, node_memory=a.node_memory, volcano_conf=a.volcano_conf,
                              real_nodes=a.real_nodes, real_node_gpus=a.real_node_gpus,
                              real_node_images=list(a.real_node_image),
                              timeout=a.timeout, keep_on_failure=a.keep_on_failure)
            kc = Box(opts).up()
            print(kc)
        elif a.cmd == "down":
            names = list_boxes() if a.all else [a.name]
            for n in names:
                b = Box(name=n)
                if not b.load():
                    print(f"[localbox] no box named {n!r} (nothing to stop)", file=sys.stderr)
                    continue
                b.down()
        elif a.cmd == "status":
            out = []
            for n in [a.name] if a.name else list_boxes():
                b = Box(name=n)
                out.append(b.status() if b.load() else {"name": n, "healthy": False, "detail": "no such box"})
            print(json.dumps(out, indent=2))
            return 0 if out and all(o["healthy"] for o in out) else 1
        elif a.cmd == "paths":
            print(json.dumps({"cache": str(paths.cache_root()), "key": paths.cache_key(),
                              "bin": str(paths.bin_dir()), "crds": str(paths.crd_dir()),
                              "boxes": str(paths.boxes_dir()),
                              "missing": paths.missing_binaries()}, indent=2))
        elif a.cmd == "cache-key":
            print(paths.cache_key())
    except BoxError as e:
        print(f"[localbox] ERROR: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
