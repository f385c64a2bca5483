"""Errors as recorded data: what a failed step or run stores, and what replay raises."""

from __future__ import annotations

import traceback
from typing import Any

from resumable.errors import StepFailed, WorkflowFailed

_MAX_TRACEBACK = 8_000


def error_info(
    error: BaseException,
    *,
    step: str | None = None,
    seq: int | None = None,
    attempts: int | None = None,
) -> dict[str, Any]:
    """A plain-data description of an error, safe to encode and to show."""
    if isinstance(error, StepFailed):  # a step failure the workflow let through
        return {
            "type": error.error_type,
            "message": error.message,
            "step": error.step,
            "seq": error.seq,
            "attempts": error.attempts,
            "traceback": _traceback(error),
        }
    return {
        "type": type(error).__qualname__,
        "message": str(error),
        "step": step,
        "seq": seq,
        "attempts": attempts,
        "traceback": _traceback(error),
    }


def step_failed(run_id: str, info: dict[str, Any]) -> StepFailed:
    """The StepFailed a workflow sees for a recorded step failure."""
    return StepFailed(
        run_id=run_id,
        seq=int(info.get("seq") or 0),
        step=str(info.get("step")),
        error_type=str(info.get("type")),
        message=str(info.get("message")),
        attempts=int(info.get("attempts") or 1),
    )


def workflow_failed(run_id: str, info: dict[str, Any]) -> WorkflowFailed:
    """The WorkflowFailed raised for a recorded run failure."""
    step = info.get("step")
    return WorkflowFailed(
        run_id=run_id,
        error_type=str(info.get("type")),
        message=str(info.get("message")),
        step=None if step is None else str(step),
    )


def _traceback(error: BaseException) -> str:
    text = "".join(traceback.format_exception(error))
    return text if len(text) <= _MAX_TRACEBACK else "..." + text[-_MAX_TRACEBACK:]
