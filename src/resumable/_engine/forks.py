"""Forking a run: a new run that shares the first steps of another's journal.

The fork records only `forked_from` and `fork_seq`; `runs.load_journal` reads the
shared steps from the original (never copied), and the original is never modified.
"""

from __future__ import annotations

from typing import Any

from resumable._engine.context import Runtime
from resumable._engine.ids import new_run_id
from resumable._engine.journal import get_run, load_journal
from resumable.errors import RunConflict
from resumable.stores.kinds import is_step
from resumable.stores.places import run_place
from resumable.stores.protocol import RunRecord


async def fork_run(
    runtime: Runtime,
    source: str,
    *,
    at_step: int,
    run_id: str | None,
    args: tuple[Any, ...] | None,
    kwargs: dict[str, Any] | None,
) -> str:
    """`Engine.fork`: record a queued run sharing `source`'s first `at_step` steps.

    Without `args` and `kwargs` it takes the original's arguments.

    `at_step` counts steps as `Engine.history` numbers them (a `map_steps`
    call is one step, its items share its number), not the entries it lists.

    Raises:
        RunConflict: `at_step` is past the original's last step, or `run_id` exists.
    """
    store, serde = runtime.store, runtime.serde
    original = await get_run(store, source)
    journal = await load_journal(store, original, serde=serde)
    last = max((seq for seq in journal if is_step(seq)), default=0)
    if not 0 <= at_step <= last:
        raise RunConflict(
            run_id=source,
            reason=f"has {last} steps (numbered as `resumable show {source}` "
            f"prints them; map_steps items share their call's number), so "
            f"at_step must be between 0 and {last}; got {at_step}",
        )
    run_id = run_id if run_id is not None else new_run_id()
    if args is None and kwargs is None:
        args, kwargs = serde.loads(original.input, place=run_place(source, "input"))
    now_ms = runtime.clock.now_ms()
    created = await store.create_run(
        RunRecord(
            run_id=run_id,
            workflow=original.workflow,
            status="queued",
            input=serde.dumps(
                (tuple(args or ()), dict(kwargs or {})),
                place=run_place(run_id, "input"),
                root="args",
            ),
            created_at_ms=now_ms,
            updated_at_ms=now_ms,
            forked_from=source,
            fork_seq=at_step,
            # it replays the source's steps: it needs code that can run those
            version=original.version,
        )
    )
    if created.forked_from != source or created.created_at_ms != now_ms:
        raise RunConflict(run_id=run_id, reason="already exists; choose another run_id")
    return run_id
