"""The one JSON log format of every process (controller, agent, webhook): one object per line.

Fields: ``ts`` (UTC, milliseconds, ``Z``), ``level``, ``logger``, ``msg``, then the record's structured
fields at the top level, from ``extra={...}`` (``log.info("eviction planned", extra={"pod": ...})``) or
from ``extra={"fields": {...}}`` (the webhook's access log), and ``exc`` with a traceback.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage(),
        }
        for k, v in vars(record).items():
            if k == "fields" and isinstance(v, dict):
                out.update(v)
            elif k not in _STD_ATTRS and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


def json_handler(stream: Any = None) -> logging.Handler:
    """A handler writing JSON lines to ``stream`` (default: stderr)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    return handler
