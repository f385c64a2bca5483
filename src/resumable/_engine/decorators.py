"""`@workflow` and `@step`: journaled calls inside a run, plain calls outside.

Each decorator records a spec in the registries of `specs` and wraps the function:
inside a run a call takes the next seq and runs through `steps.execute_step`
(a step) or `children.run_child` (a workflow called by another: a child run).
"""

from __future__ import annotations

import functools
import inspect
import threading
import typing
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from resumable._engine.bridge import wait_on
from resumable._engine.cache_policy import CachePolicy, policy_of
from resumable._engine.children import run_child
from resumable._engine.context import active_run
from resumable._engine.ids import check_id
from resumable._engine.retry import NO_RETRY, Retry
from resumable._engine.schedules import DECLARED, declare
from resumable._engine.specs import (
    STEPS,
    TYPES,
    WORKFLOWS,
    StepSpec,
    WorkflowSpec,
    default_workflow_name,
    legacy_names,
)
from resumable._engine.steps import execute_step, recorded_success, replayed
from resumable._engine.streams import collecting

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
T = TypeVar("T")


class StepDecorator(Protocol):
    """What `@step(name=..., retry=...)` returns: `@step` with those settings."""

    @overload
    def __call__(  # type: ignore[overload-overlap]  # text joins; Any may be either
        self, fn: Callable[P, AsyncIterator[str]], /
    ) -> Callable[P, Coroutine[Any, Any, str]]: ...
    @overload
    def __call__(
        self, fn: Callable[P, AsyncIterator[T]], /
    ) -> Callable[P, Coroutine[Any, Any, list[T]]]: ...
    @overload
    def __call__(self, fn: F, /) -> F: ...


# a streaming step (an async generator) is awaited for its assembled value
@overload
def step(  # type: ignore[overload-overlap]  # text joins; Any may be either
    fn: Callable[P, AsyncIterator[str]], /
) -> Callable[P, Coroutine[Any, Any, str]]: ...
@overload
def step(
    fn: Callable[P, AsyncIterator[T]], /
) -> Callable[P, Coroutine[Any, Any, list[T]]]: ...
@overload
def step(fn: F, /) -> F: ...
@overload
def step(
    *,
    name: str | None = None,
    retry: Retry | None = None,
    cache: bool | CachePolicy = False,
    version: str | None = None,
) -> StepDecorator: ...
def step(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    retry: Retry | None = None,
    cache: bool | CachePolicy = False,
    version: str | None = None,
) -> Any:
    """Journal every call of this function made inside a run.

    Inside a run, a call takes the next seq when it is made; its result (or its
    final error, once `retry` is exhausted) is committed to the store before the
    caller sees it, and every later execution of the run returns the recorded
    result without running the function. Outside a run it is an ordinary call.

    An `async def` that `yield`s is a streaming step: its chunks are appended to
    the run's feed as they come, readable from any process (`Engine.stream`),
    and its value (awaited by the caller, and journaled) is the chunks joined
    when they are all text, else their list.

    Args:
        fn: An `async def` or plain `def` function, or an async generator.
        name: The name recorded in the journal (default: the function's qualname).
        retry: How to retry when the step raises (default: no retry).
        cache: Share its results across runs (`True`, or a `CachePolicy` with a
            TTL, a key function, a scope): a call whose key another run
            recorded is served from that run's journal instead of executing.
            Only for steps whose result depends on their arguments alone.
        version: The step's code version in its cache key (default: a hash of
            its source, so any edit of the function is a miss).
    """
    policy = policy_of(cache)

    def decorate(fn: F) -> F:
        if inspect.isasyncgenfunction(fn):  # a streaming step: runs as a coroutine
            fn = typing.cast("F", collecting(fn))
        spec = StepSpec(
            name=check_id("step name", name or fn.__qualname__),
            fn=fn,
            is_async=inspect.iscoroutinefunction(fn),
            retry=retry or NO_RETRY,
            cache=policy,
            version=version,
        )
        STEPS[spec.name] = spec
        TYPES.defer(spec.register_types)
        wrapper = _journaled(fn, spec, f"step {spec.name!r}", execute_step)
        wrapper.__resumable_step__ = spec  # type: ignore[attr-defined]  # marker read by the engine
        return typing.cast("F", wrapper)

    return decorate(fn) if fn is not None else decorate


@overload
def workflow(fn: F, /) -> F: ...
@overload
def workflow(
    *,
    name: str | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    version: str | None = None,
    schedule: str | None = None,
    tz: str = "UTC",
    catch_up: int = 0,
) -> Callable[[F], F]: ...
def workflow(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    version: str | None = None,
    schedule: str | None = None,
    tz: str = "UTC",
    catch_up: int = 0,
) -> F | Callable[[F], F]:
    """Make a function a durable workflow that `Engine.run` can start and resume.

    On resume the body runs again from the top and its steps replay, so it must be
    deterministic apart from its steps. Outside a run it is an ordinary call.

    An `async def` that `yield`s is a streaming step: its chunks are appended to
    the run's feed as they come, readable from any process (`Engine.stream`),
    and its value (awaited by the caller, and journaled) is the chunks joined
    when they are all text, else their list.

    Args:
        fn: An `async def` or plain `def` function, or an async generator.
        name: The name runs record and `Engine.resume` looks up. Default:
            `module:qualname`, with the module named as it is imported, also
            when it runs as a script: `python agent.py` records `agent:fn`, so
            `resumable resume RUN --app agent` finds it. Give a name to keep
            runs resumable when the function moves; runs recorded under an
            older default (`__main__:fn`) still resume.
        budget_usd: Stop the run before a step once incurred spend passes this.
        budget_tokens: Stop the run before a step once incurred tokens pass this.
        version: The code's version, recorded on every run it starts (and shown
            by `resumable runs`), so workers of old and new code can each claim
            the runs they can run during a rolling deploy (`Worker(versions=)`).
        schedule: A cron expression (five fields, or six with seconds last):
            every worker that imports this workflow starts it, with no
            arguments, once per tick, as the run `sched:<name>:<UTC tick>`
            (see docs/guide/schedules.md). Needs `resumable[schedule]`.
        tz: The IANA time zone the cron fields are read in.
        catch_up: After downtime, start at most this many missed ticks besides
            the latest (0: skip them).

    Raises:
        ScheduleInvalid: `schedule` or `tz` cannot be read (names the workflow).
    """

    def decorate(fn: F) -> F:
        registered = check_id("workflow name", name or default_workflow_name(fn))
        spec = WorkflowSpec(
            name=registered,
            aliases=legacy_names(fn, registered),
            fn=fn,
            is_async=inspect.iscoroutinefunction(fn),
            budget_usd=budget_usd,
            budget_tokens=budget_tokens,
            version=version,
        )
        WORKFLOWS.add(spec)
        if schedule is not None:
            DECLARED.add(declare(spec, schedule, tz=tz, catch_up=catch_up))
        TYPES.defer(spec.register_types)
        # called inside a run, a workflow is a child run: it takes a seq like a step
        wrapper = _journaled(
            fn, spec, f"workflow {spec.name!r} (as a child run)", run_child
        )
        wrapper.__resumable_workflow__ = spec  # type: ignore[attr-defined]  # marker read by the engine
        return typing.cast("F", wrapper)

    return decorate(fn) if fn is not None else decorate


def _journaled(
    fn: Callable[..., Any],
    spec: StepSpec | WorkflowSpec,
    what: str,
    execute: Callable[..., Coroutine[Any, Any, Any]],
) -> Callable[..., Any]:
    """The decorated callable: a plain call outside a run, a journaled one inside.

    Inside a run the call takes the next seq when it is made, not when it is
    awaited, so gather() replays in the same order in any process. `execute` runs
    the call on the run's loop; a sync workflow's thread replays a recorded
    success of it itself.
    """
    journal_name = spec.journal_name

    if spec.is_async:

        @functools.wraps(fn)
        def call_async(*args: Any, **kwargs: Any) -> Any:
            ctx = active_run()
            if ctx is None:
                return fn(*args, **kwargs)
            if threading.get_ident() != ctx.loop_thread:
                raise TypeError(
                    f"async {what} was called from a sync workflow; make the workflow "
                    f"`async def`, or this a plain `def`"
                )
            return execute(ctx, ctx.take_seq(), spec, args, kwargs)

        return call_async

    @functools.wraps(fn)
    def call_sync(*args: Any, **kwargs: Any) -> Any:
        ctx = active_run()
        if ctx is None:
            return fn(*args, **kwargs)
        if threading.get_ident() == ctx.loop_thread:
            raise TypeError(
                f"sync {what} was called from an async workflow, where it would block the "
                f"event loop; make it `async def` (wrap blocking code in "
                f"`await asyncio.to_thread(...)`), or the workflow a plain `def`"
            )
        seq = ctx.take_seq()
        if not spec.annotations_registered:
            spec.register_types()
        record = recorded_success(ctx, seq, journal_name, args, kwargs)
        if record is not None:
            return replayed(ctx, record)
        return wait_on(ctx.loop, execute(ctx, seq, spec, args, kwargs))

    return call_sync
