"""hack/build-binaries.sh run for real with a stand-in ``go`` on PATH, so that no Go toolchain is
needed: ``go build`` logs each build to $FAKE_GO_COUNT, sleeps $FAKE_GO_SLEEP seconds and writes the
-o file, a script that prints the version stamped by -ldflags (Helm 4's; empty for the others)."""

from __future__ import annotations

import os
from pathlib import Path

FAKE_GO = r"""#!/usr/bin/env bash
case "$1" in
  version) echo "go version go1.26.8 linux/amd64" ;;
  env) echo /nonexistent/go-build ;;
  build)
    out=""; ver=""
    while [[ $# -gt 0 ]]; do
      [[ "$1" == -o ]] && out="$2"
      [[ "$1" == -ldflags ]] && ver="$(sed -n 's/.*helm\/v4\/internal\/version.version=\([^ ]*\).*/\1/p' <<<"$2")"
      shift
    done
    echo "build $out" >>"$FAKE_GO_COUNT"
    sleep "${FAKE_GO_SLEEP:-0}"
    printf '#!/bin/sh\necho %s\n' "$ver" >"$out"; chmod +x "$out" ;;
  *) echo "fake go: unsupported $*" >&2; exit 1 ;;
esac
"""


def fake_go_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment with the stand-in ``go`` first on PATH, a cache of its own under
    ``tmp_path`` and no VOLCANO_VERSION."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    go = bindir / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "VOLCANO_VERSION"}
    env.update(PATH=f"{bindir}:{env['PATH']}", VOLCANO_ELASTIC_CACHE=str(tmp_path / "cache"),
               FAKE_GO_COUNT=str(tmp_path / "builds.txt"))
    return env


def builds(env: dict[str, str]) -> list[str]:
    """The builds the stand-in ``go`` ran so far (``build <-o file>``), oldest first."""
    p = Path(env["FAKE_GO_COUNT"])
    return p.read_text().splitlines() if p.exists() else []
