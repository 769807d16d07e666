"""Where the box finds its binaries, CRDs and state, and keeps the logs of a failed start (shared
with hack/build-binaries.sh)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = HACK_DIR.parent
VERSIONS_FILE = HACK_DIR / "versions.env"
BUILD_SCRIPT = HACK_DIR / "build-binaries.sh"

# binary name -> (module it is built from, key in versions.env)
BINARIES: dict[str, tuple[str, str]] = {
    "etcd": ("go.etcd.io/etcd/server/v3", "ETCD_VERSION"),
    "kube-apiserver": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    "kube-controller-manager": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    "kubectl": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    "kubelet": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    "kube-scheduler": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    "coredns": ("github.com/coredns/coredns", "COREDNS_VERSION"),
    "vc-scheduler": ("volcano.sh/volcano", "VOLCANO_VERSION"),
    "vc-controller-manager": ("volcano.sh/volcano", "VOLCANO_VERSION"),
    "kwok": ("sigs.k8s.io/kwok", "KWOK_VERSION"),
    "training-operator": ("github.com/kubeflow/training-operator", "TRAINING_OPERATOR_VERSION"),
    "helm": ("helm.sh/helm/v3", "HELM_VERSION"),
    "helm4": ("helm.sh/helm/v4", "HELM4_VERSION"),
}
# Pins that are not part of the cache key (same list in build-binaries.sh, UNKEYED_RE): a tool beside
# the box whose binary says its own version, rebuilt alone when its pin changes.
UNKEYED = ("HELM4_VERSION",)


# Pins the environment may override (same rule in build-binaries.sh): VOLCANO_VERSION=v1.14.1
# selects another supported Volcano (hack/gomod/volcano-<version>/) and its own cache key.
OVERRIDABLE = ("VOLCANO_VERSION",)
_VERSION_RE = re.compile(r"^v\d+\.\d+\.\d+$")


def version_lines() -> list[str]:
    """The KEY=value lines of versions.env, with the environment's overrides applied."""
    out = []
    for ln in VERSIONS_FILE.read_text().splitlines():
        if not re.match(r"^[A-Z0-9_]+=", ln):
            continue
        key = ln.split("=", 1)[0]
        env = os.environ.get(key) if key in OVERRIDABLE else None
        if env:
            if not _VERSION_RE.match(env):
                raise ValueError(f"{key}={env} (environment) is not a version like v1.15.1")
            ln = f"{key}={env}"
        out.append(ln)
    return out


def versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in version_lines():
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip().strip('"')
    return out


def supported_volcano_versions() -> list[str]:
    return sorted(p.name.removeprefix("volcano-") for p in (HACK_DIR / "gomod").glob("volcano-v*"))


def cache_root() -> Path:
    env = os.environ.get("VOLCANO_ELASTIC_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "volcano-elastic"


def cache_key() -> str:
    """Same rule as build-binaries.sh: "v-" + the first 12 hex digits of the sha256 of the
    KEY=value lines of versions.env (each with its newline; comments do not count), with the
    environment's VOLCANO_VERSION in place of the file's, and without the UNKEYED pins."""
    lines = [ln for ln in version_lines() if ln.split("=", 1)[0] not in UNKEYED]
    return "v-" + hashlib.sha256("".join(ln + "\n" for ln in lines).encode()).hexdigest()[:12]


def build_dir() -> Path:
    return cache_root() / cache_key()


def bin_dir() -> Path:
    env = os.environ.get("VOLCANO_ELASTIC_BIN_DIR")
    return Path(env).expanduser() if env else build_dir() / "bin"


def crd_dir() -> Path:
    return build_dir() / "crds"


def kwok_stages_dir() -> Path:
    return build_dir() / "kwok-stages"


def build_log(name: str) -> Path:
    return build_dir() / "logs" / f"build-{name}.log"


def boxes_dir() -> Path:
    return cache_root() / "boxes"


def keep_failed_logs(name: str, logs_dir: Path) -> Path | None:
    """Move the logs of box `name`'s failed start out of its dir (which down() removes), to
    <boxes>/.failed-logs/<name>; older than a day there are removed. None when there are none."""
    if not logs_dir.is_dir():
        return None
    root = boxes_dir() / ".failed-logs"
    if root.is_dir():  # keep a day's worth
        for old in root.iterdir():
            if time.time() - old.stat().st_mtime > 86400:
                shutil.rmtree(old, ignore_errors=True)
    dst = root / name
    shutil.rmtree(dst, ignore_errors=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.move(str(logs_dir), str(dst))
    except OSError:
        return None
    return dst


def binary(name: str) -> Path:
    return bin_dir() / name


def missing_binaries(names: list[str] | tuple[str, ...] | None = None) -> list[str]:
    names = list(BINARIES) if names is None else list(names)
    return [n for n in names if not os.access(binary(n), os.X_OK)]


def describe_missing(names: list[str]) -> str:
    vs = versions()
    parts = []
    for n in names:
        mod, key = BINARIES[n]
        log = build_log(n)
        parts.append(
            f"{n} (module {mod}@{vs.get(key, '?')}; expected at {binary(n)}; "
            f"build log: {log if log.exists() else 'none yet'})"
        )
    return "missing binaries: " + "; ".join(parts) + ". Build them with: bash hack/build-binaries.sh"


def gomodcache() -> Path:
    """Go's module cache (where hack/build-binaries.sh's downloads live)."""
    env = os.environ.get("GOMODCACHE")
    if env:
        return Path(env)
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    return Path(out) if out else Path.home() / "go" / "pkg" / "mod"
