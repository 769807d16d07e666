"""JSON log lines: one object per line, structured fields at the top level.

Callers pass fields with ``extra={"fields": {...}}``. The webhook app leaves a review's fields
in the WSGI environ (``REVIEW_ENVIRON_KEY``) so that the access log line of a request carries
them: one line per review.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

REVIEW_ENVIRON_KEY = "volcano_elastic.review"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))


def json_handler() -> logging.Handler:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    return handler
