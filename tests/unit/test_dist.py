"""`make dist` (hack/dist.py): the chart package renders what the chart directory renders, and the
documents install from the file names `make dist` writes, never from a public index where our
names are not published. The wheels in a clean venv: tests/integration/test_dist.py; the image:
tests/real/test_image.py."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
import yaml

from hack import dist
from hack.localbox import dockerfile
from tests.harness.chart import CHART, helm

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "docs/install.md", "docs/checkpointing.md", "jobkit/README.md",
        "manifests/examples/pytorchjob-elastic.yaml"]


def chart_version() -> str:
    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["version"])


def kit_version() -> str:
    text = (ROOT / "jobkit" / "src" / "volcano_elastic_job" / "__init__.py").read_text()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert m
    return m.group(1)


@pytest.fixture(scope="module")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    helm("version")  # skips, saying why, without helm
    return dist.chart(tmp_path_factory.mktemp("dist"))


def test_the_chart_package_is_named_for_its_version_and_carries_the_schema(packaged: Path) -> None:
    assert packaged.name == f"volcano-elastic-{chart_version()}.tgz"
    with tarfile.open(packaged) as tar:
        names = set(tar.getnames())
    assert {"volcano-elastic/Chart.yaml", "volcano-elastic/values.yaml", "volcano-elastic/values.schema.json",
            "volcano-elastic/templates/NOTES.txt"} <= names


@pytest.mark.parametrize("sets", [[], ["--set", "certs.mode=cert-manager"]], ids=["defaults", "cert-manager"])
def test_the_chart_package_renders_what_the_chart_renders(packaged: Path, sets: list[str]) -> None:
    args = ["template", "volcano-elastic", "-n", "volcano-elastic-system", *sets]
    from_package = helm(*args[:2], str(packaged), *args[2:]).stdout
    from_dir = helm(*args[:2], str(CHART), *args[2:]).stdout
    assert from_package == from_dir
    assert "kind: Deployment" in from_package


def test_the_package_refuses_bad_values_like_the_chart(packaged: Path) -> None:
    r = helm("template", "volcano-elastic", str(packaged), "--set", "config.defaults.minScaleUpGain=0.3",
             check=False)
    assert r.returncode != 0 and "minScaleUpGain" in r.stderr


def test_documents_name_the_files_make_dist_writes() -> None:
    v = dockerfile.version()
    text = "\n".join((ROOT / d).read_text() for d in DOCS)
    mentioned = set(re.findall(r"dist/(volcano[-_][\w.*-]+?\.(?:whl|tgz|oci\.tar))", text))
    assert mentioned, "no document installs from dist/"
    real = {f"volcano-elastic-{chart_version()}.tgz", f"volcano-elastic-{v}.oci.tar",
            f"volcano_elastic-{v}-py3-none-any.whl", f"volcano_elastic_job-{kit_version()}-py3-none-any.whl"}
    for name in mentioned:
        pattern = re.escape(name).replace(r"\*", ".*")
        assert any(re.fullmatch(pattern, r) for r in real), f"the documents name dist/{name}; make dist writes {real}"


@pytest.mark.parametrize("doc", DOCS)
def test_no_document_installs_our_names_from_the_public_index(doc: str) -> None:
    """Neither name is published on PyPI: from the public index, pip would install whatever someone
    registered under it."""
    text = (ROOT / doc).read_text()
    bad = re.findall(r"pip install (?:-\S+ )*(volcano[-_]elastic(?:[-_]job)?)(?=[\s`)\]]|$)", text, re.M)
    assert not bad, f"{doc}: `pip install {bad[0]}` installs from the public index, where the name is not ours"


def test_make_dist_and_make_pictures_are_targets() -> None:
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^dist: .*## ", make, re.M) and "-m hack.dist" in make
    assert re.search(r"^pictures: .*## ", make, re.M) and "-m hack.pictures" in make
    assert "dist/" in (ROOT / ".gitignore").read_text().split()
