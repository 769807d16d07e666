"""JSON log lines: the format every process shares (``elastic_controller/logs.py``).

Callers pass fields with ``extra={"fields": {...}}``. The webhook app leaves a review's fields
in the WSGI environ (``REVIEW_ENVIRON_KEY``) so that the access log line of a request carries
them: one line per review.
"""

from __future__ import annotations

from elastic_controller.logs import JsonFormatter, json_handler

__all__ = ["REVIEW_ENVIRON_KEY", "JsonFormatter", "json_handler"]

REVIEW_ENVIRON_KEY = "volcano_elastic.review"
