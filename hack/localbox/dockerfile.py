"""The Dockerfile's image, built from the Dockerfile itself by buildah (daemonless, from Debian's
archive), on a Python base image made here: no Docker engine, no registry.

    python_base_image()   Debian bookworm (mmdebstrap, minbase) with python3, python3-venv,
                          python-is-python3 and ca-certificates: what the Dockerfile needs of
                          `python:3.11-slim-bookworm` (`python`, `python -m venv`, groupadd), as
                          an OCI archive cached by its inputs. Passed to the build as
                          `--build-arg PYTHON_IMAGE=oci-archive:<archive>`.
    dockerfile_image()    `buildah build` of the repository's Dockerfile on that base, written as
                          an OCI archive named IMAGE_REF (`ctr images import` tags it so); cached
                          by the hash of the build context, the Dockerfile and the base.

The build's RUN steps install requirements-image.txt from the package index, as anyone's
`docker build` does. Where this host's pip needs its own configuration to reach the index (a
proxy's certificate authority, a mirror), /etc/pip.conf and the CA bundle are lent to the RUN
steps as read-only volumes (`buildah build --volume`): they are never copied into the image.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import image

PYTHON_BASE_REF = "localhost/volcano-elastic-python:3.11-bookworm"
PYTHON_BASE_PACKAGES = ["python3", "python3-venv", "python-is-python3", "ca-certificates"]
# what the build lends to the RUN steps when this host has them (see the module's docstring)
HOST_PIP_FILES = ("/etc/pip.conf", "/etc/ssl/certs/ca-certificates.crt")
# the files the Dockerfile COPYs, besides itself (.dockerignore admits exactly these)
CONTEXT = ("requirements-image.txt", "pyproject.toml", "README.md", "elastic_controller", "webhook", "certs")


def buildah() -> str:
    found = shutil.which("buildah")
    if found is None:
        raise image.ImageError("buildah is missing (apt-get install buildah; sudo bash hack/install-node-packages.sh "
                               "installs it)")
    return found


def python_base_image(say: Callable[[str], None] = print) -> Path:
    """The local stand-in for python:3.11-slim-bookworm, as an OCI archive (cached)."""
    key = image._tree_hash([], (image.DEBIAN_SUITE + ",".join(PYTHON_BASE_PACKAGES) + "python-base-v1").encode())

    def build(work: Path, layer: Path) -> None:
        rootfs = work / "rootfs"
        image._mmdebstrap(rootfs, PYTHON_BASE_PACKAGES, [image._CLEAN_HOOK], say)
        image.layer_from_dir(rootfs, layer)

    def write(layer: Path, out: Path) -> None:
        image.write_oci_archive(out, layer, PYTHON_BASE_REF, entrypoint=[], cmd=["python3"],
                                env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                     "LANG=C.UTF-8"])

    return image._cached("volcano-elastic-python", key, build, write, say)


def _context_files() -> list[Path]:
    return image._sources("Dockerfile", ".dockerignore", *CONTEXT)


def version() -> str:
    text = (image._repo_root() / "elastic_controller" / "__init__.py").read_text()
    return text.split("__version__ = ")[1].split('"')[1]


def _host_volumes(files: Iterable[str] = HOST_PIP_FILES) -> list[str]:
    return [f"--volume={f}:{f}:ro" for f in files if os.path.isfile(f)]


def build_argv(base: Path, tag: str, *, volumes: list[str] | None = None) -> list[str]:
    """The `buildah build` command line: the Dockerfile as it is, the base and version as build
    arguments, the host's network (the RUN steps download wheels), layers cached in buildah's storage."""
    root = image._repo_root()
    return [buildah(), "build", "--quiet", "--layers", "--network=host", "--isolation=chroot",
            f"--build-arg=PYTHON_IMAGE=oci-archive:{base}", f"--build-arg=VERSION={version()}",
            *(volumes if volumes is not None else _host_volumes()),
            "--tag", tag, "--file", str(root / "Dockerfile"), str(root)]


def _oci_dir_to_archive(layout: Path, out: Path, ref: str) -> str:
    """Tar an OCI image layout (buildah push oci:DIR) with its one manifest named REF the way
    `ctr images import` reads it (io.containerd.image.name); returns the manifest digest."""
    index = json.loads((layout / "index.json").read_text())
    if len(index.get("manifests", [])) != 1:
        raise image.ImageError(f"{layout}: expected one manifest in index.json, got {index.get('manifests')}")
    desc = _annotate(index, ref)["manifests"][0]
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        for name in ("oci-layout",):
            tar.add(str(layout / name), arcname=name)
        data = json.dumps(index, sort_keys=True).encode()
        ti = tarfile.TarInfo("index.json")
        ti.size, ti.mode = len(data), 0o644
        tar.addfile(ti, io.BytesIO(data))
        for blob in sorted((layout / "blobs" / "sha256").iterdir()):
            tar.add(str(blob), arcname=f"blobs/sha256/{blob.name}")
    tmp.replace(out)
    return str(desc["digest"])


def _ref_slug(ref: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in ref.rsplit("/", 1)[-1])


def _annotate(index: dict[str, Any], ref: str) -> dict[str, Any]:
    desc = index["manifests"][0]
    desc["annotations"] = {**desc.get("annotations", {}), "io.containerd.image.name": ref,
                           "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[-1]}
    return index


def retag_archive(src: Path, out: Path, ref: str) -> None:
    """A copy of the OCI archive SRC whose one manifest is named REF (the blobs are the same)."""
    tmp = out.with_suffix(".tmp")
    with tarfile.open(src) as tin, tarfile.open(tmp, "w") as tout:
        for m in tin:
            f = tin.extractfile(m) if m.isfile() else None
            if m.name == "index.json" and f is not None:
                data = json.dumps(_annotate(json.loads(f.read()), ref), sort_keys=True).encode()
                m.size = len(data)
                tout.addfile(m, io.BytesIO(data))
            else:
                tout.addfile(m, f)
    tmp.replace(out)


def dockerfile_image(say: Callable[[str], None] = print, ref: str = image.IMAGE_REF) -> Path:
    """The Dockerfile built by buildah on python_base_image(), as an OCI archive named REF
    (cached under <cache>/images/ by the hash of the context, the Dockerfile and the base; the same
    build under another name is a copy with another index.json)."""
    if os.geteuid() != 0:
        raise image.ImageError("building the image needs root (mmdebstrap and buildah run as root here); "
                               "`python -m hack.dist --no-image` builds the wheels and the chart without it")
    buildah()
    base = python_base_image(say)
    key = image._tree_hash(_context_files(), (base.name + "dockerfile-v1").encode())
    d = image.images_dir()
    out = d / f"volcano-elastic-dockerfile-{key}-{_ref_slug(ref)}.oci.tar"
    if out.exists():
        return out
    same = sorted(d.glob(f"volcano-elastic-dockerfile-{key}-*.oci.tar"))
    if same:
        retag_archive(same[0], out, ref)
        return out
    tag = f"localhost/volcano-elastic-build:{key}"
    t = time.monotonic()
    say(f"buildah build of the Dockerfile on {base.name} ...")
    r = subprocess.run(build_argv(base, tag), capture_output=True, text=True)
    if r.returncode != 0:
        raise image.ImageError(f"buildah build failed ({r.returncode}):\n{(r.stdout + r.stderr)[-4000:]}")
    with tempfile.TemporaryDirectory(dir=d, prefix=".oci-") as tmp:
        layout = Path(tmp) / "layout"
        r = subprocess.run([buildah(), "push", "--quiet", tag, f"oci:{layout}"], capture_output=True, text=True)
        if r.returncode != 0:
            raise image.ImageError(f"buildah push failed ({r.returncode}):\n{r.stderr[-3000:]}")
        _oci_dir_to_archive(layout, out, ref)
    subprocess.run([buildah(), "rmi", tag], capture_output=True, text=True)  # untag; cached layers stay
    for old in d.glob("volcano-elastic-dockerfile-*.oci.tar"):  # other contents: stale
        if not old.name.startswith(f"volcano-elastic-dockerfile-{key}-"):
            old.unlink(missing_ok=True)
    say(f"image from the Dockerfile built in {time.monotonic() - t:.0f}s ({out.stat().st_size >> 20} MiB): {out.name}")
    return out


def archive_config(archive: Path) -> dict[str, object]:
    """The image config (Entrypoint, Cmd, Env, User, ...) of an OCI archive's one manifest."""
    with tarfile.open(archive) as tar:
        def blob(digest: str) -> bytes:
            f = tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            assert f is not None
            return f.read()

        f = tar.extractfile("index.json")
        assert f is not None
        index = json.loads(f.read())
        manifest = json.loads(blob(index["manifests"][0]["digest"]))
        config: dict[str, object] = json.loads(blob(manifest["config"]["digest"]))
    return config


def file_sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    """hack/build-image.sh: one image as an OCI archive; prints its path last."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="hack/build-image.sh", description=(
        "Build an image as an OCI archive without Docker or a registry (cached by content); "
        "prints the archive's path last. volcano-elastic: the Dockerfile, by buildah."))
    ap.add_argument("which", choices=["pause", "volcano-elastic", "train", "python-base"], nargs="?",
                    default="volcano-elastic")
    a = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(f"[build-image {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    builders: dict[str, Callable[[Callable[[str], None]], Path]] = {
        "pause": image.pause_image, "volcano-elastic": dockerfile_image, "train": image.train_image,
        "python-base": python_base_image}
    try:
        out = builders[a.which](say)
    except (image.ImageError, subprocess.CalledProcessError) as e:
        say(f"ERROR: {e}")
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
