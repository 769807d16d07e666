"""The image the real-node tier installs and `make dist` publishes: the Dockerfile built by buildah
on a Python base made by mmdebstrap (hack/localbox/dockerfile.py). Its config is the Dockerfile's
runtime stage, and unpacked, it runs: `volcano-elastic --help` as user 65532, our three packages at
the repository's version, every pinned dependency, no pip. (tests/real/test_install.py then runs
its webhook and controller in the cluster.)

Needs root (chroot, the build) and buildah + mmdebstrap (hack/install-node-packages.sh); skips,
saying why, without them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hack.localbox import dockerfile, image
from tests.harness.dockerfile import dockerfile_runtime
from tests.harness.required import cannot_run

ROOT = Path(__file__).resolve().parents[2]


def unpack(archive: Path, dest: Path) -> None:
    """The image's root file system: its layers in order, whiteouts applied."""
    import json

    with tarfile.open(archive) as outer:
        def blob(digest: str) -> Any:
            return outer.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")

        index = json.loads(outer.extractfile("index.json").read())  # type: ignore[union-attr]
        manifest = json.loads(blob(index["manifests"][0]["digest"]).read())
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as tar:
                for m in tar:
                    name = Path(m.name)
                    if name.name == ".wh..wh..opq":
                        for p in (dest / name.parent).glob("*"):
                            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
                    elif name.name.startswith(".wh."):
                        gone = dest / name.parent / name.name[4:]
                        if gone.is_dir() and not gone.is_symlink():
                            shutil.rmtree(gone)
                        elif gone.exists() or gone.is_symlink():
                            gone.unlink()
                    else:
                        tar.extract(m, dest, set_attrs=True, filter="fully_trusted")


@pytest.fixture(scope="module")
def built() -> Path:
    if os.geteuid() != 0:
        cannot_run("real", "the image build and chroot need root")
    try:
        return dockerfile.dockerfile_image(print)
    except image.ImageError as e:
        cannot_run("real", f"the image could not be built: {e}")


@pytest.fixture(scope="module")
def rootfs(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("image") / "rootfs"
    d.mkdir()
    unpack(built, d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(rootfs: Path, *argv: str, user: str = "65532:65532") -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/opt/venv/bin:/usr/bin:/bin", "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"}
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    return subprocess.run([chroot, f"--userspec={user}", str(rootfs), *argv], capture_output=True, text=True,
                          env=env, timeout=120)


def test_config_is_the_dockerfiles_runtime_stage(built: Path) -> None:
    config = dockerfile.archive_config(built)["config"]
    assert isinstance(config, dict)
    want = dockerfile_runtime()
    assert config["User"] == want["user"] == "65532:65532"
    assert config["Entrypoint"] == want["entrypoint"] == ["volcano-elastic"]
    assert config["Cmd"] == want["cmd"] == ["--help"]
    assert config["WorkingDir"] == want["workdir"]
    env = dict(e.split("=", 1) for e in config["Env"])
    for key, value in want["env"].items():  # type: ignore[union-attr]
        assert env[key] == value.replace("$PATH", env["PATH"].split(":", 1)[1]), key
    assert config["Labels"]["org.opencontainers.image.version"] == dockerfile.version()


def test_the_entrypoint_runs_as_the_image_user(rootfs: Path) -> None:
    r = run(rootfs, "/opt/venv/bin/volcano-elastic", "--help")
    assert r.returncode == 0, r.stderr
    for sub in ("webhook", "controller", "plan", "status", "certs", "simulate"):
        assert re.search(rf"\b{sub}\b", r.stdout), f"`volcano-elastic --help` lists no {sub}:\n{r.stdout}"
    who = run(rootfs, "/opt/venv/bin/python", "-c", "import os; print(os.getuid(), os.getgid())")
    assert who.stdout.split() == ["65532", "65532"], who.stderr


def test_our_packages_and_the_pinned_dependencies_are_installed_and_pip_is_not(rootfs: Path) -> None:
    r = run(rootfs, "/opt/venv/bin/python", "-c",
            "import elastic_controller, webhook.app, certs, importlib.metadata as m; "
            "print(elastic_controller.__version__); "
            "print('\\n'.join(f'{d.metadata[\"Name\"]}=={d.version}' for d in m.distributions()))")
    assert r.returncode == 0, r.stderr
    version, *dists = r.stdout.split()
    assert version == dockerfile.version()
    have = {re.sub(r"[-_.]+", "-", d.split("==")[0]).lower(): d.split("==")[1] for d in dists}
    for line in (ROOT / "requirements-image.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, pin = line.split("==")
            assert have.get(re.sub(r"[-_.]+", "-", name).lower()) == pin.strip(), line
    assert not (rootfs / "opt/venv/bin/pip").exists() and "pip" not in have
