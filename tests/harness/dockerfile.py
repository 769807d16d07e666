"""The Dockerfile's runtime settings (its last stage), as the image tests compare them."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def dockerfile_runtime(text: str = DOCKERFILE) -> dict[str, object]:
    """USER, ENTRYPOINT, CMD, WORKDIR and ENV of the Dockerfile's last stage."""
    text = text.replace("\\\n", " ")
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
