"""PostgreSQL: group commit of steps, and what a driver error means.

Concurrent `commit_step` calls share transactions (group commit). A commit that finds
no write in flight is written at once by its caller, with no timer and no hand-off; the
commits that queue meanwhile are written together by a flusher task, as one statement,
and each caller is resolved only once that statement's COMMIT returned. The fence check
and the write happen in one transaction that takes a FOR SHARE lock on the run row, so
a concurrent lease takeover either waits for the write to commit or makes the write see
the new fence and refuse it (LeaseLost). The lone commit calls a PL/pgSQL function
(`resumable_commit_step`, created by the migration) because PL/pgSQL keeps its plans per
connection, where a plain statement would be parsed and planned on every step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from resumable.errors import CheckpointWriteError, LeaseLost, StoreError
from resumable.stores import _sql
from resumable.stores._postgres_sql import Statements
from resumable.stores.protocol import StepRecord

Pool = AsyncConnectionPool[AsyncConnection[DictRow]]
T = TypeVar("T")
BATCH_MAX: Final = 1000
DRIVER_ERRORS: Final = (psycopg.Error, UnicodeError)  # UnicodeError: lone surrogates
# what the server or driver refuses as data: retrying cannot help (a missing grant or
# table, a ProgrammingError, may be fixed meanwhile: that one is retried)
REFUSED: Final = (psycopg.DataError, psycopg.IntegrityError, UnicodeError)


@dataclass(slots=True)
class _Pending:
    """A commit_step waiting for the flusher."""

    step: StepRecord
    fence: int
    future: asyncio.Future[None]

    @property
    def key(self) -> tuple[str, int]:
        return self.step.run_id, self.step.seq


class StepCommits:
    """The store's `commit_step`: one statement for every commit queued meanwhile."""

    def __init__(
        self,
        *,
        url: str,
        statements: Statements,
        pool: Callable[[], Pool | None],
        on_failure: Callable[[BaseException], None],
    ) -> None:
        self.url, self._sql = url, statements
        self._pool, self._on_failure = pool, on_failure
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._writing = False  # a commit_step write is in flight (inline or flusher)
        self.transactions = 0  # how many transactions commit_step used
        self._listeners: list[Callable[[int], None]] = []

    async def wait_idle(self) -> None:
        """Return once the queued commits are written."""
        if self._flusher is not None:
            await asyncio.wait([self._flusher])

    async def commit(self, step: StepRecord, fence: int) -> None:
        """Write `step` if `fence` holds its run's lease (LeaseLost if not)."""
        loop = asyncio.get_running_loop()
        pending = _Pending(step, fence, loop.create_future())
        if self._writing:  # a write is in flight: join the group written next
            self._pending.append(pending)
            await pending.future
            return
        # nothing in flight: write it now in the caller's own task, with no timer and
        # no hand-off, so a lone sequential commit costs one statement and nothing else
        self._writing = True
        try:
            await abandoned_if_cancelled(self._write_batch([pending]))
        except asyncio.CancelledError:
            pending.future.cancel()  # its write goes on; no one awaits its outcome
            raise
        finally:
            self._writing = False
            if self._pending:  # what queued meanwhile goes out together
                self._writing = True
                self._flusher = loop.create_task(self._flush())
        await pending.future  # settled by now: returns, or raises its outcome

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """Call `listener(size)` after each group of step commits is written."""
        self._listeners.append(listener)

    async def _flush(self) -> None:
        """Write the queued commits group by group until none are left."""
        batch: list[_Pending] = []
        try:
            while self._pending:
                batch = self._take_batch()
                if batch:
                    await self._write_batch(batch)
        finally:
            self._writing = False
            self._flusher = None
            for pending in (*batch, *self._pending):  # only if we were cancelled
                _settle(
                    pending,
                    CheckpointWriteError(
                        run_id=pending.step.run_id,
                        seq=pending.step.seq,
                        detail="the store was shut down during the write",
                    ),
                )
            self._pending.clear()

    def _take_batch(self) -> list[_Pending]:
        """The queued commits, oldest first, up to the first repeated (run_id, seq).

        A statement may write a row only once, and a later record for the same seq
        must replace an earlier one: it waits for the next write.
        """
        batch: list[_Pending] = []
        keys: set[tuple[str, int]] = set()
        taken = 0
        for pending in self._pending:
            if len(batch) >= BATCH_MAX or pending.key in keys:
                break
            taken += 1
            if pending.future.done():  # its caller was cancelled before the write
                continue
            keys.add(pending.key)
            batch.append(pending)
        del self._pending[:taken]
        return batch

    async def _write_batch(self, batch: list[_Pending]) -> None:
        """Write `batch` in one transaction, then settle every caller; never raises."""
        try:
            written = await self._insert_steps(batch)
        except DRIVER_ERRORS as exc:
            self._on_failure(exc)
            if len(batch) > 1 and isinstance(exc, REFUSED):
                # a record the driver or server refused (bad data): spare the others
                for pending in batch:
                    await self._write_batch([pending])
                return
            for pending in batch:
                _settle(pending, _batch_error(pending, exc))
            return
        except Exception as exc:  # noqa: BLE001 - e.g. closed meanwhile: callers must hear
            for pending in batch:
                _settle(pending, _batch_error(pending, exc))
            return
        # in autocommit the statement's own transaction has committed when execute()
        # returns (the server answers only after COMMIT), so callers may go on now
        for listener in self._listeners:
            listener(len(batch))
        for pending in batch:
            if pending.key in written:
                _settle(pending, None)
            else:
                _settle(
                    pending,
                    LeaseLost(
                        run_id=pending.step.run_id,
                        seq=pending.step.seq,
                        fence=pending.fence,
                    ),
                )

    async def _insert_steps(self, batch: list[_Pending]) -> set[tuple[str, int]]:
        """Insert or replace the batch's records whose fence holds; their keys."""
        pool = self._pool()
        if pool is None:
            raise StoreError(store=self.url, detail="the store is closed")
        async with pool.connection() as conn:
            self.transactions += 1
            if len(batch) == 1:
                params = (*_sql.step_values(batch[0].step), batch[0].fence)
                cur = await conn.execute(self._sql.commit_step, params)
                row = await cur.fetchone()
                return {batch[0].key} if row is not None and row["written"] else set()
            cur = await conn.execute(self._sql.commit_steps, _columns(batch))
            rows = await cur.fetchall()
            return {(_sql.from_text(row["run_id"]), row["seq"]) for row in rows}


async def abandoned_if_cancelled(work: Coroutine[Any, Any, T]) -> T:
    """Await `work` in a task of its own, so a cancelled caller stops waiting at once.

    psycopg answers a cancelled query by cancelling it on the server and waiting for
    that: some 10 s when the server does not answer (a blackhole, a paused server).
    A caller's deadline (the engine's `store_retry_s`) must not wait for it: the task
    finishes that in the background and gives its connection back to the pool.
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Take an abandoned task's outcome, so that none is logged as never retrieved."""
    if not task.cancelled():
        task.exception()


def _columns(batch: list[_Pending]) -> tuple[list[object], ...]:
    """The batch as one array per column (STEP_COLUMNS order, then the fence)."""
    rows = [(*_sql.step_values(p.step), p.fence) for p in batch]
    return tuple(list(column) for column in zip(*rows, strict=True))


def is_lost_connection(exc: BaseException | None) -> bool:
    """Whether `exc` says the connection died (restart, network), not the statement."""
    if not isinstance(exc, psycopg.OperationalError) or isinstance(exc, PoolTimeout):
        return False
    state = exc.sqlstate or ""  # none: the client noticed the connection was gone
    return state == "" or state.startswith(("08", "57P"))


def write_error(
    run_id: str, seq: int | None, exc: BaseException
) -> CheckpointWriteError:
    """The error a failed write for a run raises; data refused is not transient."""
    detail = exc.detail if isinstance(exc, StoreError) else f"postgresql: {exc}"
    return CheckpointWriteError(
        run_id=run_id,
        seq=seq,
        detail=detail,
        transient=not isinstance(exc, REFUSED),
    )


def _batch_error(pending: _Pending, exc: BaseException) -> CheckpointWriteError:
    error = write_error(pending.step.run_id, pending.step.seq, exc)
    error.__cause__ = exc  # raised in the caller's task, chained as `from exc` would
    return error


def _settle(pending: _Pending, error: BaseException | None) -> None:
    if pending.future.done():  # the caller was cancelled; the write stands regardless
        return
    if error is None:
        pending.future.set_result(None)
    else:
        pending.future.set_exception(error)
