"""Structured logs: one JSON object per record, with the run's fields.

The engine logs under `resumable.*` (`resumable.runs`, `resumable.steps`,
`resumable.worker`) with `run_id`, `workflow`, `seq`, `step`, `attempt` and
`fence` in the record's `extra` where they apply. Records never carry step
arguments, results or error messages written by your code: only names, ids,
counts and exception class names.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Final

__all__ = ["FIELDS", "JsonFormatter", "configure"]

FIELDS: Final = ("run_id", "workflow", "seq", "step", "attempt", "fence", "queue")
"""The `extra` fields a record may carry, copied into its JSON object."""


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON: time, level, logger, message, fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info and record.exc_info[0] is not None:
            entry["exception"] = record.exc_info[0].__name__
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(log_format: str = "text", level: str = "INFO") -> logging.Handler:
    """Send the `resumable` loggers to stderr as text or JSON (for the CLI).

    Args:
        log_format: "text" or "json".
        level: The lowest level shown (a `logging` level name).

    Returns:
        The handler added to the `resumable` logger (remove it to undo).
    """
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
        )
    handler.setLevel(level.upper())
    logger = logging.getLogger("resumable")
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > handler.level:
        logger.setLevel(handler.level)
    return handler
