"""How a payload is named: in messages, and in encryption's associated data.

One definition for the engine and the stores, because a frame sealed under one
name opens only under the same name.
"""

from __future__ import annotations

from resumable.stores.protocol import Payload

__all__ = ["input_place", "payload_place", "run_place", "step_place"]


def run_place(run_id: str, what: str) -> str:
    """How messages (and encryption's associated data) name a run's payload."""
    return f"run {run_id!r} {what}"


def step_place(run_id: str, seq: int, name: str) -> str:
    """How messages (and encryption's associated data) name a step's payload."""
    return f"run {run_id!r}, step #{seq} {name!r}"


def input_place(run_id: str, key: str) -> str:
    """How messages (and encryption's associated data) name an input's payload."""
    return run_place(run_id, f"input {key!r}")


def payload_place(payload: Payload) -> str:
    """The place of a payload a store's scan found, from its kind and key."""
    key = payload.key
    if payload.kind in ("step.output", "step.usage") and len(key) == 3:
        place = step_place(str(key[0]), int(key[1]), str(key[2]))
        return place + (" usage" if payload.kind == "step.usage" else "")
    if payload.kind == "input.value" and len(key) == 2:
        return input_place(str(key[0]), str(key[1]))
    if payload.kind in ("run.input", "run.output") and key:
        return run_place(str(key[0]), payload.kind.removeprefix("run."))
    return f"{payload.kind} {key!r}"
