"""`make dist`: build into dist/ what a release would publish, and say what was built.

    dist/volcano_elastic-<v>-py3-none-any.whl        the controller, agent, webhook and CLI
    dist/volcano_elastic_job-<v>-py3-none-any.whl    the job kit, for training images
    dist/volcano-elastic-<chart version>.tgz         the Helm chart (helm package)
    dist/volcano-elastic-<v>.oci.tar                 the image, built from the Dockerfile by buildah
                                                     (hack/localbox/dockerfile.py), named
                                                     docker.io/library/volcano-elastic:<v>
    dist/SHA256SUMS                                  sha256sum -c reads it

None of these names is published on a public index or registry: install from these files.

    python -m hack.dist [--no-image] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGE_NAME = "docker.io/library/volcano-elastic"


class DistError(RuntimeError):
    pass


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise DistError(f"{what} failed ({r.returncode}): {' '.join(argv)}\n{(r.stdout + r.stderr)[-3000:]}")


def source_date_epoch() -> str:
    """The last commit's time (SOURCE_DATE_EPOCH when set): the wheels' file times, so that the same
    commit gives the same wheel bytes."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return os.environ["SOURCE_DATE_EPOCH"]
    r = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "315532800"


def wheels(out: Path, python: str = sys.executable) -> list[Path]:
    """Both wheels, built without their dependencies (pip wheel --no-deps)."""
    built = []
    env = {**os.environ, "SOURCE_DATE_EPOCH": source_date_epoch()}
    for project, pattern in ((ROOT, "volcano_elastic-*.whl"), (ROOT / "jobkit", "volcano_elastic_job-*.whl")):
        for old in out.glob(pattern):
            old.unlink()
        _run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(project)], f"pip wheel {project}",
             env=env)
        found = sorted(out.glob(pattern))
        if len(found) != 1:
            raise DistError(f"pip wheel {project}: expected one {pattern} in {out}, found {found}")
        built += found
    return built


def helm_binary() -> Path:
    from hack.localbox import paths

    own = paths.binary("helm")
    if own.exists():
        return own
    found = shutil.which("helm")
    if found:
        return Path(found)
    _run(["bash", str(ROOT / "hack" / "build-binaries.sh"), "helm"], "bash hack/build-binaries.sh helm")
    return own


def chart(out: Path) -> Path:
    for old in out.glob("volcano-elastic-*.tgz"):
        old.unlink()
    _run([str(helm_binary()), "package", str(ROOT / "charts" / "volcano-elastic"), "--destination", str(out)],
         "helm package")
    found = sorted(out.glob("volcano-elastic-*.tgz"))
    if len(found) != 1:
        raise DistError(f"helm package: expected one chart in {out}, found {found}")
    return found[0]


def oci_image(out: Path, say: Callable[[str], None]) -> Path:
    from hack.localbox import dockerfile, image

    v = dockerfile.version()
    try:
        built = dockerfile.dockerfile_image(say, ref=f"{IMAGE_NAME}:{v}")
    except image.ImageError as e:
        raise DistError(str(e)) from e
    dst = out / f"volcano-elastic-{v}.oci.tar"
    shutil.copyfile(built, dst)
    return dst


def sha256(p: Path) -> str:
    from hack.localbox.dockerfile import file_sha256

    return file_sha256(p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make dist", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "dist")
    ap.add_argument("--no-image", action="store_true", help="skip the image (it needs root, buildah and mmdebstrap)")
    a = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(f"[dist {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        t = time.monotonic()
        built = wheels(out)
        say(f"wheels in {time.monotonic() - t:.1f}s")
        t = time.monotonic()
        built.append(chart(out))
        say(f"chart in {time.monotonic() - t:.1f}s")
        if not a.no_image:
            t = time.monotonic()
            built.append(oci_image(out, say))
            say(f"image in {time.monotonic() - t:.1f}s")
    except DistError as e:
        say(f"ERROR: {e}")
        return 1
    sums = {p: sha256(p) for p in built}
    (out / "SHA256SUMS").write_text("".join(f"{s}  {p.name}\n" for p, s in sums.items()))
    print(f"dist/ ({time.monotonic() - t0:.0f}s; not published on PyPI or any registry: install from these files)")
    for p, s in sums.items():
        size = p.stat().st_size
        human = f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size / 1024:.1f} KiB"
        print(f"  {p.name:<48} {human:>10}  sha256:{s}")
    print(f"  {'SHA256SUMS':<48} (sha256sum -c {out.name}/SHA256SUMS from {out.parent})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
