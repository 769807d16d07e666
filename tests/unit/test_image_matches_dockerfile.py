"""The image the box builds without Docker (hack/localbox/image.py) and the Dockerfile agree on
what matters to a user: the user, the entrypoint and default command, HOME and PATH, the working
directory, and that both install exactly requirements-image.txt plus our wheel. The real-node
tier checks the built archive itself (tests/real/test_image.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hack.localbox import image

ROOT = Path(__file__).resolve().parents[2]


def dockerfile_runtime() -> dict[str, object]:
    """USER, ENTRYPOINT, CMD, WORKDIR and ENV of the Dockerfile's last stage."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    last = text[text.rindex("\nFROM "):]
    out: dict[str, object] = {"env": {}}
    for line in last.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "USER":
            out["user"] = rest.strip()
        elif word in ("ENTRYPOINT", "CMD"):
            out[word.lower()] = json.loads(rest)
        elif word == "WORKDIR":
            out["workdir"] = rest.strip()
        elif word == "ENV":
            for k, v in re.findall(r"(\w+)=(\S+)", rest):
                out["env"][k] = v  # type: ignore[index]
    return out


def test_user_entrypoint_cmd_and_workdir_agree() -> None:
    d = dockerfile_runtime()
    assert d["user"] == image.IMAGE_USER
    assert d["entrypoint"] == ["volcano-elastic"]
    assert d["cmd"] == ["--help"]
    assert d["workdir"] == "/tmp"


def test_environment_agrees() -> None:
    d = dockerfile_runtime()["env"]
    ours = dict(e.split("=", 1) for e in image.IMAGE_ENV)
    assert isinstance(d, dict)
    for key in ("HOME", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"):
        assert ours[key] == d[key], key
    assert d["PATH"].split(":")[0] == ours["PATH"].split(":")[0] == "/opt/venv/bin"


def test_both_install_requirements_image_txt_and_only_binary_wheels() -> None:
    docker = (ROOT / "Dockerfile").read_text()
    assert "--only-binary=:all:" in docker and "-r requirements-image.txt" in docker
    src = (ROOT / "hack" / "localbox" / "image.py").read_text()
    assert "--only-binary=:all:" in src and "-r /tmp/build/requirements-image.txt" in src
    assert "console_scripts" in src  # our wheel's entry points become scripts, as pip makes them
    assert "pip uninstall" in docker and "pip uninstall" in src  # no pip left in either


def test_oci_archive_is_a_loadable_layout(tmp_path: Path) -> None:
    """write_oci_archive: index -> manifest -> config/layer, digests and diff_ids consistent."""
    import hashlib
    import tarfile

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
