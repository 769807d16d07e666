"""The repository's own conventions: every make target listed by ``make help``, one version."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import elastic_controller

ROOT = Path(__file__).resolve().parents[2]


def test_make_help_lists_every_target() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_-]+):(?!=)", makefile, re.M)}
    (phony,) = re.findall(r"^\.PHONY: (.*)$", makefile, re.M)
    # What `make help` greps for (the same pattern as the help target).
    help_pattern = re.search(r"grep -E '(.*?)' \$\(MAKEFILE_LIST\)", makefile)
    assert help_pattern is not None
    listed = {line.split(":", 1)[0] for line in makefile.splitlines() if re.match(help_pattern.group(1), line)}
    assert targets == listed, f"targets without a '## ' description: {sorted(targets - listed)}"
    assert set(phony.split()) == targets
    for needed in ("types", "imports", "fmt", "test-e2e"):
        recipe = re.search(rf"^{needed}:.*\n((?:\t.*\n)+)", makefile, re.M)
        assert recipe is not None and recipe.group(1).strip(), f"{needed} does nothing"


def test_one_version() -> None:
    version = elastic_controller.__version__
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "elastic_controller.__version__"}
    assert re.search(r"^ARG VERSION=(\S+)$", (ROOT / "Dockerfile").read_text(), re.M).group(1) == version  # type: ignore[union-attr]
    assert re.search(r"newTag: (\S+)", (ROOT / "manifests/base/kustomization.yaml").read_text()).group(1) == version  # type: ignore[union-attr]
    assert f"## {version}" in (ROOT / "CHANGELOG.md").read_text()
