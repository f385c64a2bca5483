"""Noticing a forgotten `await`: a coroutine where a value belongs.

`summarize(fetch(doc))` passes a coroutine, not the document: it would be
fingerprinted as "a coroutine" and handed to the step, and a step or workflow
that returns one would record `<coroutine object ...>`. Step arguments are looked
at on every call; a step's or a workflow's result when the codec refused it (it
refuses every coroutine and future, so a result holding one always comes here).
Each is looked at the top and one level into a list, tuple or dict, where
`[fetch(d) for d in docs]` puts them; what is found is a SerializationError that
names the step and the missing `await`. The coroutines found are closed, so none
warns "never awaited" later.

Every step call passes here, so the first look is one exact-type test per value
(`_SUSPECT`); only a native coroutine, an asyncio future or task, or a container
is looked at more closely. A coroutine of another kind (one made by
Cython, say) or a subclass of asyncio's futures is not noticed.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from typing import Any, Final

from resumable._engine.specs import StepSpec
from resumable.errors import SerializationError

_SUSPECT: Final = frozenset(
    {types.CoroutineType, asyncio.Future, asyncio.Task, list, tuple, dict}
)
"""The exact types that may be, or hold, a coroutine or future never awaited."""


def refuse_unawaited(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    run_id: str,
    step: str,
) -> None:
    """Raise if a step's argument is a coroutine (or future) never awaited."""
    if _SUSPECT.isdisjoint(map(type, args)) and (
        not kwargs or _SUSPECT.isdisjoint(map(type, kwargs.values()))
    ):
        return
    for i, value in enumerate(args):
        error = _unawaited(value, f"args[{i}]", run_id=run_id, step=step)
        if error is not None:
            raise error
    for key, value in kwargs.items():
        error = _unawaited(value, f"kwargs[{key!r}]", run_id=run_id, step=step)
        if error is not None:
            raise error


def unawaited_result(
    value: Any, *, run_id: str, step: str | None
) -> SerializationError | None:
    """The error to raise if a step's (with `step` None, the workflow's) result is one.

    Asked once the codec refused the result: it refuses every coroutine and
    future, and this names the missing `await` where its message would not.
    """
    return _unawaited(value, "result", run_id=run_id, step=step)


def _unawaited(
    value: Any, path: str, *, run_id: str, step: str | None
) -> SerializationError | None:
    if type(value) not in _SUSPECT:
        return None
    found = list(_pending_in(value, path))
    if not found:
        return None
    where, first = found[0]
    what = _describe(first)  # before closing, which drops the coroutine's frame
    for _, pending in found:
        if asyncio.iscoroutine(pending):
            pending.close()
    return SerializationError(
        run_id=run_id,
        step=step,
        path=where,
        detail=f"is {what} that was never awaited: add the missing `await` "
        f"where it is made",
    )


def _pending_in(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if _is_pending(value):
        yield path, value
    elif type(value) is dict:
        for key, item in value.items():
            if _is_pending(item):
                yield f"{path}[{key!r}]", item
    elif type(value) in (list, tuple):
        for i, item in enumerate(value):
            if _is_pending(item):
                yield f"{path}[{i}]", item


def _is_pending(value: Any) -> bool:
    return asyncio.iscoroutine(value) or asyncio.isfuture(value)


def _describe(pending: Any) -> str:
    """`the coroutine of step 'fetch'`, `the coroutine fetch()`, or `a Task`."""
    if not asyncio.iscoroutine(pending):
        return f"a {type(pending).__name__}"
    frame = getattr(pending, "cr_frame", None)
    spec = frame.f_locals.get("spec") if frame is not None else None
    if isinstance(spec, StepSpec):  # a step call: steps.execute_step(ctx, seq, spec...)
        return f"the coroutine of a call to step {spec.name!r}"
    name = getattr(pending, "__qualname__", type(pending).__name__)
    return f"the coroutine of a call to {name}()"
