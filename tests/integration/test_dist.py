"""`make dist`'s wheels install as the documents say, in clean virtual environments, and work from
there (not from this checkout): the job kit from its file alone (it has no dependency), the
controller's wheel with its dependencies at requirements-image.txt's pins from the package index.
Slow (two wheels built, a venv with our dependencies downloaded), so in this tier; it needs no box.
The chart package: tests/unit/test_dist.py; the image: tests/real/test_image.py."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hack.localbox import dockerfile

ROOT = Path(__file__).resolve().parents[2]


def clean_env() -> dict[str, str]:
    """This process's environment without what would import the checkout instead of the wheel."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def sh(*argv: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=clean_env(),
                       timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, argv))} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def dist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "hack.dist", "--no-image", "--out", str(out)], capture_output=True,
                       text=True, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    print(r.stdout)
    return out


def venv(where: Path) -> Path:
    sh(sys.executable, "-m", "venv", where, cwd=where.parent)
    return where / "bin"


def test_dist_lists_what_it_built_with_sizes_and_sha256(dist_dir: Path) -> None:
    v = dockerfile.version()
    sums = dict(reversed(line.split("  ")) for line in (dist_dir / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {f"volcano_elastic-{v}-py3-none-any.whl", f"volcano_elastic_job-{v}-py3-none-any.whl",
                         f"volcano-elastic-{v}.tgz"}
    for name, digest in sums.items():
        assert hashlib.sha256((dist_dir / name).read_bytes()).hexdigest() == digest, name


def test_the_kit_wheel_installs_from_its_file_alone(dist_dir: Path, tmp_path: Path) -> None:
    bin_ = venv(tmp_path / "kit")
    sh(bin_ / "pip", "install", "-q", "--no-index", "--find-links", dist_dir, "volcano-elastic-job", cwd=tmp_path)
    r = sh(bin_ / "python", "-c", "import volcano_elastic_job as k; print(k.__version__, k.__file__); "
           "from volcano_elastic_job import NoticeWatch, record_checkpoint", cwd=tmp_path)
    version, where = r.stdout.split()
    assert version == dockerfile.version() and where.startswith(str(tmp_path / "kit"))
    assert (bin_ / "volcano-elastic-run").is_file()  # the launcher (it needs torch, which a training image has)
    pip_list = sh(bin_ / "pip", "list", "--format=freeze", cwd=tmp_path).stdout
    assert {line.split("==")[0] for line in pip_list.split()} <= {"volcano-elastic-job", "pip", "setuptools"}


def test_the_controller_wheel_installs_with_its_pinned_dependencies(dist_dir: Path, tmp_path: Path) -> None:
    bin_ = venv(tmp_path / "ours")
    wheel = next(dist_dir.glob("volcano_elastic-*.whl"))
    sh(bin_ / "pip", "install", "-q", "--only-binary=:all:", "-c", ROOT / "requirements-image.txt", wheel,
       cwd=tmp_path, timeout=900)
    r = sh(bin_ / "python", "-c", "import elastic_controller, webhook.app, certs; "
           "print(elastic_controller.__version__, elastic_controller.__file__)", cwd=tmp_path)
    version, where = r.stdout.split()
    assert version == dockerfile.version() and where.startswith(str(tmp_path / "ours"))
    helped = sh(bin_ / "volcano-elastic", "--help", cwd=tmp_path).stdout
    assert "webhook" in helped and "controller" in helped
    sh(bin_ / "pip", "check", cwd=tmp_path)
