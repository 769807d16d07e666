"""The image is built from the Dockerfile itself (hack/localbox/dockerfile.py: buildah on a Python
base made by mmdebstrap), for `make dist` and the real-node tier alike; what can be checked without
building it. tests/real/test_image.py builds it and runs it."""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from pathlib import Path

import pytest

from hack.localbox import dockerfile, image
from tests.harness.dockerfile import DOCKERFILE, ROOT, dockerfile_runtime


def test_the_base_image_is_one_build_argument_with_todays_default() -> None:
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim-bookworm$", DOCKERFILE, re.M)
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, re.M) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_build_argv_builds_the_dockerfile_on_the_local_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dockerfile.shutil, "which", lambda name: f"/usr/bin/{name}")
    base = tmp_path / "base.oci.tar"
    argv = dockerfile.build_argv(base, "localhost/x:1", volumes=[])
    assert argv[:2] == ["/usr/bin/buildah", "build"]
    assert f"--build-arg=PYTHON_IMAGE=oci-archive:{base}" in argv
    assert f"--build-arg=VERSION={dockerfile.version()}" in argv
    assert argv[argv.index("--file") + 1] == str(ROOT / "Dockerfile")
    assert argv[-1] == str(ROOT)  # the context: the checkout, filtered by .dockerignore
    assert "--network=host" in argv  # the RUN steps download the pinned wheels


def test_buildah_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dockerfile.shutil, "which", lambda name: None)
    with pytest.raises(image.ImageError, match=r"buildah is missing.*apt-get install buildah"):
        dockerfile.build_argv(Path("/x"), "t")


def test_host_pip_files_are_lent_read_only_and_only_when_present(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\n")
    assert dockerfile._host_volumes([str(conf), str(tmp_path / "absent.crt")]) == [f"--volume={conf}:{conf}:ro"]
    assert "COPY" not in " ".join(dockerfile.HOST_PIP_FILES)  # lent to RUN steps, never in the image


def test_the_cache_key_covers_every_file_the_dockerfile_copies() -> None:
    copied = re.findall(r"^COPY (?!--from)(.+) \./?\S*$", DOCKERFILE, re.M)
    sources = {s.rstrip("/") for line in copied for s in line.split()}
    assert sources == set(dockerfile.CONTEXT)
    ignore = (ROOT / ".dockerignore").read_text().split()
    for src in sources:
        assert f"!{src}/" in ignore or f"!{src}" in ignore, f".dockerignore leaves {src} out of the context"


def test_the_base_has_what_the_dockerfile_runs() -> None:
    """python:3.11-slim has `python`; Debian has it from python-is-python3, and venv from python3-venv."""
    assert "python -m venv" in DOCKERFILE and "python-is-python3" in dockerfile.PYTHON_BASE_PACKAGES
    assert "python3-venv" in dockerfile.PYTHON_BASE_PACKAGES
    assert "groupadd" in DOCKERFILE  # passwd: in every minbase root file system


def test_runtime_stage_is_what_the_manifests_expect() -> None:
    d = dockerfile_runtime()
    assert d["user"] == image.IMAGE_USER == "65532:65532"
    assert d["entrypoint"] == ["volcano-elastic"]
    assert d["cmd"] == ["--help"]
    assert d["workdir"] == "/tmp"
    env = d["env"]
    assert isinstance(env, dict) and env["PATH"].split(":")[0] == "/opt/venv/bin" and env["HOME"] == "/tmp"


def _fake_layout(root: Path) -> tuple[Path, str]:
    """An OCI layout as `buildah push oci:DIR` writes it: one manifest, no containerd name."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> str:
        d = hashlib.sha256(data).hexdigest()
        (blobs / d).write_bytes(data)
        return d

    config = json.dumps({"config": {"Entrypoint": ["volcano-elastic"], "User": "65532:65532"}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": f"sha256:{put(config)}"},
                           "layers": []}).encode()
    m = put(manifest)
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": f"sha256:{m}",
         "size": len(manifest)}]}))
    return root, f"sha256:{m}"


def test_the_archive_is_named_for_ctr_import(tmp_path: Path) -> None:
    layout, digest = _fake_layout(tmp_path / "layout")
    out = tmp_path / "img.oci.tar"
    assert dockerfile._oci_dir_to_archive(layout, out, "docker.io/library/volcano-elastic:0.1.0") == digest
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
        f = tar.extractfile("index.json")
        assert f is not None
        index = json.loads(f.read())
    assert {"oci-layout", "index.json", f"blobs/sha256/{digest.split(':')[1]}"} <= names
    ann = index["manifests"][0]["annotations"]
    assert ann["io.containerd.image.name"] == "docker.io/library/volcano-elastic:0.1.0"
    assert ann["org.opencontainers.image.ref.name"] == "0.1.0"
    config = dockerfile.archive_config(out)
    assert config["config"] == {"Entrypoint": ["volcano-elastic"], "User": "65532:65532"}


def test_a_layout_with_two_manifests_is_refused(tmp_path: Path) -> None:
    layout, _ = _fake_layout(tmp_path / "layout")
    index = json.loads((layout / "index.json").read_text())
    index["manifests"] *= 2
    (layout / "index.json").write_text(json.dumps(index))
    with pytest.raises(image.ImageError, match="expected one manifest"):
        dockerfile._oci_dir_to_archive(layout, tmp_path / "x.tar", "x:1")


def test_oci_archive_is_a_loadable_layout(tmp_path: Path) -> None:
    """write_oci_archive (pause, train, the Python base): index -> manifest -> config/layer, digests
    and diff_ids consistent."""
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "hello").write_text("#!/bin/sh\necho hi\n")
    layer = tmp_path / "layer.tar"
    image.layer_from_dir(root, layer)
    out = tmp_path / "img.tar"
    digest = image.write_oci_archive(out, layer, "example.local/x:1", entrypoint=["/bin/hello"], user="1:1")
    with tarfile.open(out) as tar:
        blobs = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(blobs["index.json"])
    desc = index["manifests"][0]
    assert desc["annotations"]["io.containerd.image.name"] == "example.local/x:1"
    assert desc["digest"] == digest
    manifest = json.loads(blobs["blobs/sha256/" + digest.split(":")[1]])
    for d in [manifest["config"], *manifest["layers"]]:
        data = blobs["blobs/sha256/" + d["digest"].split(":")[1]]
        assert hashlib.sha256(data).hexdigest() == d["digest"].split(":")[1]
        assert len(data) == d["size"]
    config = json.loads(blobs["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]  # uncompressed layer
    assert config["config"]["Entrypoint"] == ["/bin/hello"] and config["config"]["User"] == "1:1"
    with tarfile.open(layer) as t:
        assert "bin/hello" in t.getnames()


def test_the_same_build_under_another_name_is_a_copy_with_another_index(tmp_path: Path) -> None:
    """make dist names the image volcano-elastic:<version>, the real tier volcano-elastic:dev: one build."""
    layout, digest = _fake_layout(tmp_path / "layout")
    dev = tmp_path / "dev.oci.tar"
    dockerfile._oci_dir_to_archive(layout, dev, "docker.io/library/volcano-elastic:dev")
    rel = tmp_path / "rel.oci.tar"
    dockerfile.retag_archive(dev, rel, "docker.io/library/volcano-elastic:0.1.0")
    with tarfile.open(dev) as a, tarfile.open(rel) as b:
        assert a.getnames() == b.getnames()
        index = json.loads(b.extractfile("index.json").read())  # type: ignore[union-attr]
        for name in a.getnames():
            if name.startswith("blobs/"):
                assert a.extractfile(name).read() == b.extractfile(name).read()  # type: ignore[union-attr]
    assert index["manifests"][0]["digest"] == digest
    assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == "docker.io/library/volcano-elastic:0.1.0"
    assert dockerfile.archive_config(rel) == dockerfile.archive_config(dev)


def test_not_root_is_a_clear_error_before_anything_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dockerfile.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(dockerfile, "python_base_image", lambda say: pytest.fail("built without root"))
    with pytest.raises(image.ImageError, match=r"needs root.*--no-image"):
        dockerfile.dockerfile_image(lambda msg: None)
