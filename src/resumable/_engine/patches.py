"""`patched` and `deprecate_patch`: change a workflow's code while runs are in flight.

```python
if await patched("short-prompt"):
    summary = await summarize(doc, prompt=SHORT)   # new runs, and runs not past here
else:
    summary = await summarize(doc, prompt=LONG)    # runs that passed here on old code
```

How a patch point decides, at the seq `k` the next journaled call would take:

- the journal holds the marker `patch:<name>` at `k`: this run took the new branch
  before; the marker is consumed (it takes seq `k`) and the answer is True;
- the journal holds any ordinary record at `k` or later: the run passed this point
  on code without the patch; the answer is False and *no seq is taken*, so the old
  branch's steps replay at the seqs they were recorded at;
- otherwise the run has not got here yet: the marker is committed at `k` (before
  anything after it can be) and the answer is True.

So a marker only ever exists in runs that took the new branch, and it never
shifts the seqs of a run that did not. Once no stored run needs the old branch
(`resumable check` lists the runs that still do), replace `patched(name)` with
`deprecate_patch(name)`, which consumes the marker where a run recorded one and
does nothing elsewhere; once no stored run holds the marker, delete that line too.

Limit: a run whose only records after the point are `map_steps` items (a batch
was the last thing it started) cannot be seen to have passed it: item seqs do
not say where their batch was called.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from resumable._engine.bridge import wait_on
from resumable._engine.commits import commit
from resumable._engine.context import RunContext, active_run, def_workflow_run
from resumable.errors import NotInRun
from resumable.stores.kinds import is_step
from resumable.stores.places import step_place
from resumable.stores.protocol import StepRecord

MARKER_PREFIX = "patch:"


def marker_name(name: str) -> str:
    """The journal name of a patch's marker."""
    return MARKER_PREFIX + name


def patched(name: str) -> Any:
    """Whether this run takes the new branch of the patch `name` (see the module doc).

    An `async def` workflow awaits it (`if await patched("x"):`); a plain `def`
    workflow calls it and gets the bool. Testing the un-awaited value raises
    TypeError rather than always reading as true.

    Raises:
        NotInRun: called outside a workflow body run by an Engine.
    """
    ctx = _workflow_run("patched")
    if def_workflow_run() is not None:
        return wait_on(ctx.loop, _decide(ctx, name))
    return PatchDecision(ctx, name)


def deprecate_patch(name: str) -> None:
    """Mark where `patched(name)` was, once every stored run takes the new branch.

    Consumes the marker a run recorded here, so the seqs after it still line up;
    records nothing in runs without one. Works in `async def` and `def` workflows.
    """
    ctx = _workflow_run("deprecate_patch")
    recorded = ctx.journal.get(ctx.next_seq)
    if recorded is not None and recorded.name == marker_name(name):
        ctx.take_seq()


class PatchDecision:
    """What `patched()` returns in an `async def` workflow: await it for the bool."""

    __slots__ = ("_ctx", "_name")

    def __init__(self, ctx: RunContext, name: str) -> None:
        self._ctx, self._name = ctx, name

    def __await__(self) -> Generator[Any, None, bool]:
        # decided when awaited, so a decision never awaited takes no seq
        return _decide(self._ctx, self._name).__await__()

    def __bool__(self) -> bool:
        raise TypeError(
            f"patched({self._name!r}) must be awaited in an async workflow: "
            f"`if await patched({self._name!r}):`"
        )


async def _decide(ctx: RunContext, name: str) -> bool:
    if ctx.failure is not None:
        raise ctx.failure  # a write was lost: nothing more runs
    seq = ctx.next_seq
    marker = marker_name(name)
    recorded = ctx.journal.get(seq)
    if recorded is not None and recorded.name == marker:
        ctx.take_seq()
        return True
    passed = recorded is not None or any(is_step(s) and s > seq for s in ctx.journal)
    if ctx.check is not None:
        ctx.check.patch_point(seq, name, passed=passed)  # stops unless passed
    if passed:
        return False
    ctx.take_seq()
    now_ms = ctx.runtime.clock.now_ms()
    place = step_place(ctx.run_id, seq, marker)
    # committed before the new branch records anything: a replay must find it
    await commit(
        ctx,
        StepRecord(
            run_id=ctx.run_id,
            seq=seq,
            name=marker,
            fingerprint="-",
            status="ok",
            output=ctx.runtime.serde.dumps({"patch": name}, place=place),
            attempts=1,
            started_at_ms=now_ms,
            finished_at_ms=now_ms,
        ),
    )
    return True


def _workflow_run(what: str) -> RunContext:
    ctx = active_run()
    if ctx is None:
        raise NotInRun(
            call=f"{what}()",
            where="in a @workflow body run by an Engine (not in a step, and not "
            "outside a run)",
        )
    return ctx
