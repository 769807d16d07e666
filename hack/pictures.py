"""`make pictures`: the pictures README.md and docs/choosing.md show, regenerated in docs/img/.

    docs/img/real-training.svg            python -m hack.training_plot bench/results/real_training-kit.json
                                          --svg docs/img/real-training.svg --label "..." (LABEL below)
    docs/img/simulate-allocation.png      volcano-elastic simulate --example --policy all --out DIR: DIR's
    docs/img/simulate-jct_cdf.png         allocation.png, jct_cdf.png and jct_by_class.png
    docs/img/simulate-jct_by_class.png
    docs/img/pictures.json                for each picture: its command, the sha256 of the data it
                                          is drawn from and of the code that draws it, its own sha256

tests/unit/test_pictures.py regenerates the data and compares: the SVG byte for byte (it is plain
text from the standard library), the simulated pictures by their data (summary.json and the
per-job CSVs the plots are drawn from) and drawing code (elastic_controller/simulate/plots.py),
never by pixels (a matplotlib release changes those). A stale picture fails there; this command
makes it current again.

    python -m hack.pictures [--only training|simulate] [--out docs/img]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
MANIFEST = "pictures.json"

TRAINING_SOURCE = "bench/results/real_training-kit.json"
TRAINING_SVG = "real-training.svg"
LABEL = ("recorded with bench/real_training.py: 2 real nodes in the box, torchrun, the job kit "
         f"({TRAINING_SOURCE})")
TRAINING_CODE = ("hack/training_plot.py", "hack/training_log.py")

SIMULATE_ARGS = ["simulate", "--example", "--policy", "all"]
SIMULATE_PLOTS = ("allocation.png", "jct_cdf.png", "jct_by_class.png")
SIMULATE_SUMMARY = "summary.json"  # and every policy's jobs-<policy>.csv
SIMULATE_CODE = "elastic_controller/simulate/plots.py"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha(rel: str) -> str:
    return sha256((ROOT / rel).read_bytes())


def training_svg() -> str:
    """The real-training chart of the recorded run, as SVG text (deterministic)."""
    from hack import training_plot

    return training_plot.svg(training_plot.load(ROOT / TRAINING_SOURCE), LABEL)


def training_entry(svg_text: str) -> dict[str, Any]:
    return {"command": f"python -m hack.training_plot {TRAINING_SOURCE} --svg docs/img/{TRAINING_SVG} "
                       f"--label {json.dumps(LABEL)}",
            "data": {TRAINING_SOURCE: file_sha(TRAINING_SOURCE)},
            "code": {c: file_sha(c) for c in TRAINING_CODE},
            "sha256": sha256(svg_text.encode())}


def simulate(out: Path, *, plots: bool = True) -> None:
    """`volcano-elastic simulate --example --policy all --out OUT`, in a child with this checkout first on the path."""
    env_path = f"{ROOT}{':' + p if (p := __import__('os').environ.get('PYTHONPATH')) else ''}"
    r = subprocess.run([sys.executable, "-c", "import sys; from elastic_controller.cli import main; "
                        "sys.argv[0] = 'volcano-elastic'; sys.exit(main())", *SIMULATE_ARGS, "--out", str(out)],
                       capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": env_path})
    if r.returncode != 0:
        raise RuntimeError(f"volcano-elastic {' '.join(SIMULATE_ARGS)} failed:\n{r.stderr[-3000:]}")
    missing = [n for n in (*(SIMULATE_PLOTS if plots else ()), SIMULATE_SUMMARY) if not (out / n).is_file()]
    if missing:
        raise RuntimeError(f"volcano-elastic {' '.join(SIMULATE_ARGS)} wrote no {', '.join(missing)} "
                           "(is matplotlib installed? pip install -e '.[plot]')")


def simulate_data_sha(out: Path) -> dict[str, str]:
    """sha256 of each data file; summary.json names the --out directory, which is written as OUT."""
    names = [SIMULATE_SUMMARY, *sorted(p.name for p in out.glob("jobs-*.csv"))]
    return {n: sha256((out / n).read_bytes().replace(str(out).encode(), b"OUT")) for n in names}


def simulate_entries(out: Path) -> dict[str, dict[str, Any]]:
    import matplotlib

    data = simulate_data_sha(out)
    return {f"simulate-{n}": {"command": f"volcano-elastic {' '.join(SIMULATE_ARGS)} --out DIR (DIR/{n})",
                              "data": data, "code": {SIMULATE_CODE: file_sha(SIMULATE_CODE)},
                              "matplotlib": matplotlib.__version__,
                              "sha256": sha256((out / n).read_bytes())}
            for n in SIMULATE_PLOTS}


def load_manifest(img: Path = IMG) -> dict[str, dict[str, Any]]:
    p = img / MANIFEST
    return json.loads(p.read_text()) if p.exists() else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make pictures", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["training", "simulate"])
    ap.add_argument("--out", type=Path, default=IMG)
    a = ap.parse_args(argv)
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(out)
    if a.only in (None, "training"):
        text = training_svg()
        (out / TRAINING_SVG).write_text(text)
        manifest[TRAINING_SVG] = training_entry(text)
        print(f"wrote {out / TRAINING_SVG}")
    if a.only in (None, "simulate"):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                simulate(Path(tmp))
            except RuntimeError as e:
                print(f"pictures: {e}", file=sys.stderr)
                return 1
            for n in SIMULATE_PLOTS:
                shutil.copyfile(Path(tmp) / n, out / f"simulate-{n}")
                print(f"wrote {out / f'simulate-{n}'}")
            manifest.update(simulate_entries(Path(tmp)))
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out / MANIFEST}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
