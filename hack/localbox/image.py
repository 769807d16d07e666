"""Container images without Docker or a registry: OCI archives that `ctr images import` loads.

The images, each cached under <cache>/images/ by a key of everything that goes into it:

    pause               Kubernetes' own build/pause/linux/pause.c (from the module cache), built
                        static with gcc: the sandbox image of every real node.
    volcano-elastic     the Dockerfile itself, built by buildah on a Python base image made by
                        mmdebstrap: hack/localbox/dockerfile.py (the recipe of `make dist`).
    volcano-elastic-train
                        the real tier's training image: the same base with Debian's CPU-only
                        python3-torch and the job kit (jobkit/), when the repository has one.

An OCI archive is a tar of an OCI image layout (oci-layout, index.json, blobs/sha256/...) with
one uncompressed layer; index.json names the image with `io.containerd.image.name`, which is
what `ctr images import` tags it as.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import paths

PAUSE_REF = "registry.k8s.io/pause:3.10.1"
# What pods and the manifests say (manifests/overlays/kind uses volcano-elastic:dev with
# imagePullPolicy Never), and the normalized name containerd stores it under.
IMAGE = "volcano-elastic:dev"
IMAGE_REF = f"docker.io/library/{IMAGE}"
TRAIN_IMAGE = "volcano-elastic-train:dev"
TRAIN_REF = f"docker.io/library/{TRAIN_IMAGE}"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
IMAGE_USER = "65532:65532"


class ImageError(RuntimeError):
    pass


def images_dir() -> Path:
    d = paths.cache_root() / "images"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(p: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def layer_from_dir(root: Path, out: Path, mtime: int = 0) -> None:
    """A deterministic layer tar of ROOT (sorted, numeric owners kept, mtimes clamped)."""
    tmp = out.with_suffix(".tmp")

    def walk(d: Path, rel: str) -> Iterable[tuple[Path, str]]:
        for name in sorted(os.listdir(d)):
            p = d / name
            r = f"{rel}{name}"
            yield p, r
            if p.is_dir() and not p.is_symlink():
                yield from walk(p, r + "/")

    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for p, rel in walk(root, ""):
            ti = tar.gettarinfo(str(p), arcname=rel)
            ti.mtime = min(int(ti.mtime), mtime) if mtime else int(ti.mtime)
            ti.uname = ti.gname = ""
            if ti.isreg():
                with open(p, "rb") as f:
                    tar.addfile(ti, f)
            else:
                tar.addfile(ti)
    tmp.replace(out)


def write_oci_archive(out: Path, layer: Path | list[Path], ref: str, *, entrypoint: list[str],
                      cmd: list[str] | None = None, env: list[str] | None = None,
                      user: str = "", workdir: str = "/", labels: dict[str, str] | None = None) -> str:
    """Write an OCI archive of uncompressed LAYER(s), lowest first; returns the manifest digest."""
    layers = layer if isinstance(layer, list) else [layer]
    sums = [_file_sha256(p) for p in layers]
    config: dict[str, Any] = {
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint, "Cmd": cmd or [], "Env": env or
                   ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                   "User": user, "WorkingDir": workdir, "Labels": labels or {}},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d, _ in sums]},
        "history": [{"created_by": "hack/localbox/image.py"}],
    }
    config_b = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{_sha256(config_b)}", "size": len(config_b)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": f"sha256:{d}", "size": n}
                   for d, n in sums],
    }
    manifest_b = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = _sha256(manifest_b)
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": f"sha256:{manifest_digest}", "size": len(manifest_b),
                            "platform": {"architecture": "amd64", "os": "linux"},
                            "annotations": {"io.containerd.image.name": ref,
                                            "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[-1]}}]}
    tmp = out.with_suffix(".tmp")

    def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mode = 0o644
        tar.addfile(ti, io.BytesIO(data))

    with tarfile.open(tmp, "w") as tar:
        add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add_bytes(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        add_bytes(tar, f"blobs/sha256/{_sha256(config_b)}", config_b)
        add_bytes(tar, f"blobs/sha256/{manifest_digest}", manifest_b)
        for p, (d, _) in zip(layers, sums, strict=True):
            tar.add(str(p), arcname=f"blobs/sha256/{d}")
    tmp.replace(out)
    return f"sha256:{manifest_digest}"


def _cached(name: str, key: str, build_layer: Callable[[Path, Path], None], write: Callable[[Path, Path], None],
            say: Callable[[str], None]) -> Path:
    """<images>/<name>-<key>.oci.tar. The layer (the slow part: a Debian root file system) is
    cached by KEY, the hash of its inputs, as <name>-<key>.layer.tar; the archive around it
    (name, entrypoint, user, ...) is rewritten by WRITE(layer, out) when its own inputs change."""
    d = images_dir()
    layer = d / f"{name}-{key}.layer.tar"
    if not layer.exists():
        work = d / f".work-{name}-{key}-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        t = time.monotonic()
        say(f"building image {name} ({key}) ...")
        try:
            build_layer(work, layer)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        say(f"image {name} layer built in {time.monotonic() - t:.0f}s ({layer.stat().st_size >> 20} MiB)")
    probe = d / f".{name}-{key}.probe"
    write(layer, probe)
    archive_key = hashlib.sha256(probe.read_bytes()[:65536]).hexdigest()[:8]
    out = d / f"{name}-{key}-{archive_key}.oci.tar"
    if out.exists():
        probe.unlink()
    else:
        probe.replace(out)
    for old in d.glob(f"{name}-{key}-*.oci.tar"):  # the same layer in an older archive: cheap to rewrite
        if old != out:
            old.unlink(missing_ok=True)
    return out


def pause_source() -> Path:
    v = paths.versions()["KUBERNETES_VERSION"]
    src = paths.gomodcache() / f"k8s.io/kubernetes@{v}/build/pause/linux/pause.c"
    if not src.exists():
        raise ImageError(f"{src} is missing: run hack/build-binaries.sh (it downloads k8s.io/kubernetes {v})")
    return src


def pause_image(say: Callable[[str], None] = print) -> Path:
    src = pause_source()
    key = _sha256(src.read_bytes())[:12]

    def build(work: Path, layer: Path) -> None:
        root = work / "rootfs"
        root.mkdir()
        if shutil.which("gcc") is None:
            raise ImageError("gcc is needed to build the pause image (apt-get install gcc libc6-dev)")
        subprocess.run(["gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v3.10.1-volcano-elastic",
                        "-o", str(root / "pause"), str(src)], check=True)
        subprocess.run(["strip", str(root / "pause")], check=False)
        layer_from_dir(root, layer)

    return _cached("pause", key, build, lambda layer, out: write_oci_archive(
        out, layer, PAUSE_REF, entrypoint=["/pause"], user="65535:65535") and None, say)


def _repo_root() -> Path:
    return paths.HACK_DIR.parent


def _tree_hash(files: Iterable[Path], extra: bytes = b"") -> str:
    h = hashlib.sha256(extra)
    root = _repo_root()
    for f in sorted(files):
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def _sources(*dirs: str) -> list[Path]:
    root = _repo_root()
    out: list[Path] = []
    for d in dirs:
        p = root / d
        out += [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
    return out


def _mmdebstrap(rootfs: Path, include: list[str], hooks: list[str], say: Callable[[str], None]) -> None:
    if shutil.which("mmdebstrap") is None:
        raise ImageError("mmdebstrap is missing (sudo bash hack/install-node-packages.sh installs it)")
    argv = ["mmdebstrap", "--variant=minbase", "--quiet", f"--include={','.join(include)}",
            "--aptopt=Acquire::Retries \"3\"", "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*"]
    for h in hooks:
        argv.append(f"--customize-hook={h}")
    argv += [DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR]
    say(f"mmdebstrap {DEBIAN_SUITE} with {', '.join(include)} (Debian's archive; a few minutes cold)")
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise ImageError(f"mmdebstrap failed ({r.returncode}):\n{r.stderr[-4000:]}")


_USER_HOOK = ('chroot "$1" groupadd --system --gid 65532 volcano-elastic && '
              'chroot "$1" useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home '
              '--shell /usr/sbin/nologin volcano-elastic')
# The training image: what torch 1.13's Debian packages bring that a CPU training job never loads
# (mesa's drivers and the LLVM they need, torch's C++ test binaries, the test suites, apt's package
# caches): 1.3 GB -> 0.98 GB, measured; then a check that torch and torchrun still import.
_TRAIN_TRIM_HOOK = ('rm -rf "$1"/var/cache/apt/*.bin "$1"/usr/lib/*/dri "$1"/usr/lib/*/libLLVM-*.so* '
                    '"$1"/usr/lib/*/libz3.so* "$1"/usr/lib/python3/dist-packages/sympy/integrals/rubi/rubi_tests && '
                    'find "$1"/usr/lib/python3/dist-packages/torch/bin -type f ! -name torch_shm_manager -delete && '
                    'find "$1"/usr/lib/python3/dist-packages -depth -type d -name tests -exec rm -rf {} +')
_TRAIN_CHECK_HOOK = 'chroot "$1" python3 -c "import torch, torch.distributed.run, torch.distributed.elastic"'
_CLEAN_HOOK = ('rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* "$1"/tmp/* '
               '"$1"/var/log/*.log "$1"/var/cache/ldconfig/aux-cache')


def train_image(say: Callable[[str], None] = print) -> Path:
    """The real tier's training image: Debian's CPU-only python3-torch (a cached layer), and the
    job kit from jobkit/src on top (a small layer, rebuilt with the kit)."""
    root = _repo_root()
    kit = root / "jobkit" / "src" / "volcano_elastic_job"
    key = _tree_hash([], (DEBIAN_SUITE + "v2-trimmed").encode())

    def build(work: Path, layer: Path) -> None:
        rootfs = work / "rootfs"
        _mmdebstrap(rootfs, ["python3", "python3-torch", "ca-certificates"],
                    [_USER_HOOK, _CLEAN_HOOK, _TRAIN_TRIM_HOOK, _TRAIN_CHECK_HOOK], say)
        layer_from_dir(rootfs, layer)

    def write(layer: Path, out: Path) -> None:
        layers = [layer]
        if kit.is_dir():
            kit_root = out.with_suffix(".kit")
            shutil.rmtree(kit_root, ignore_errors=True)
            dst = kit_root / "usr" / "lib" / "python3" / "dist-packages" / "volcano_elastic_job"
            shutil.copytree(kit, dst, ignore=shutil.ignore_patterns("__pycache__"))
            layer_from_dir(kit_root, out.with_suffix(".kit.tar"), mtime=1)
            shutil.rmtree(kit_root, ignore_errors=True)
            layers.append(out.with_suffix(".kit.tar"))
        try:
            write_oci_archive(out, layers, TRAIN_REF, entrypoint=[], cmd=["python3"],
                              env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp",
                                   "PYTHONUNBUFFERED=1"], user=IMAGE_USER, workdir="/tmp")
        finally:
            out.with_suffix(".kit.tar").unlink(missing_ok=True)

    return _cached("volcano-elastic-train", key, build, write, say)
