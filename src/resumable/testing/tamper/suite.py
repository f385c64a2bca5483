"""The tamper suite: damage what a store wrote, then check the library fails safe.

A store's rows are the one input the library reads back without having produced
it in this process, so it must treat them as hostile. The suite fills a store
once through the public API (`scenario.populate`). Then for every table
(or key family) and column (or field) the store wrote, it takes a copy of the
filled store, damages that one value (`mutations.mutations_of`) and resumes every
run, lists, shows and loads (`scenario.actions`). Each action
must end as it would on a healthy store or with a `ResumableError`, within a
time limit and a memory bound, and a step whose own row was not damaged never
runs again. Values are decoded only into types the program registered.

`TamperSubject` is what a store gives the suite: raw access to its rows. Ours
are in the repository's `tests/tamper/subjects.py`; a third-party store writes its
own and runs `TamperSuite(its_factory).run()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from resumable._engine.engine import Engine
from resumable.errors import ResumableError
from resumable.stores.protocol import RunStore
from resumable.testing.tamper.mutations import Mutation, mutations_of
from resumable.testing.tamper.scenario import EXECUTED, actions, populate

__all__ = [
    "StoredField",
    "TamperFailure",
    "TamperReport",
    "TamperSubject",
    "TamperSuite",
]

MAX_PAYLOAD_BYTES = 1 << 20
"""The engines under test refuse payloads past this (Engine(max_payload_bytes=))."""


@dataclasses.dataclass(frozen=True, slots=True)
class StoredField:
    """One value a store wrote: a column of a row, or a field of a key."""

    table: str
    """The table, or the family of keys (`run`, `steps`...) on a key-value store."""
    row: tuple[Any, ...]
    """What the subject needs to find the row again (its key)."""
    column: str
    value: Any
    """As the driver returned it."""
    run_id: str | None = None
    """The run the row belongs to, if it belongs to one."""


class TamperSubject(Protocol):
    """Raw access to the rows of one fresh store, for the tamper suite."""

    @property
    def store(self) -> RunStore:
        """The store the suite fills and damages."""
        ...

    @property
    def url(self) -> str | None:
        """A URL the CLI can open the same store with; None if there is none."""
        ...

    async def fields(self) -> list[StoredField]:
        """Every value the store holds now, in a stable order."""
        ...

    async def write(self, field: StoredField, value: Any) -> bool:
        """Overwrite one value; False if the store's own types refuse it."""
        ...

    async def reopen(self) -> RunStore:
        """A new store object on the same data, with nothing cached."""
        ...

    async def clone(self) -> TamperSubject:
        """A new subject holding a copy of these rows (cheaper than filling one)."""
        ...

    async def drop(self) -> None:
        """Delete the store and close every connection."""
        ...


# --------------------------------------------------------------- the suite


@dataclasses.dataclass(frozen=True, slots=True)
class TamperFailure:
    """An action that did not fail safe after one mutation."""

    table: str
    column: str
    mutation: str
    action: str
    problem: str


@dataclasses.dataclass(slots=True)
class TamperReport:
    """What the suite did and found."""

    cases: int = 0
    refused_by_store: int = 0
    actions: int = 0
    typed_errors: Counter[str] = dataclasses.field(default_factory=Counter)
    peak_bytes: int = 0
    slowest_s: float = 0.0
    failures: list[TamperFailure] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """A few lines for a test log."""
        errors = ", ".join(f"{name} {n}" for name, n in self.typed_errors.most_common())
        return (
            f"{self.cases} mutations ({self.refused_by_store} refused by the store's "
            f"types), {self.actions} actions; typed errors: {errors or 'none'}; peak "
            f"{self.peak_bytes / 2**20:.1f} MiB traced, slowest action "
            f"{self.slowest_s:.2f} s; {len(self.failures)} failures"
        )


class TamperSuite:
    """Damage every column a store writes, one at a time, and check it fails safe.

    Args:
        subject: Returns a fresh, empty store with raw access to its rows.
        time_limit_s: Each action must end within this.
        memory_limit_bytes: Traced allocations during an action stay below this.
        mutation_filter: Keep only mutations whose name it accepts (to shorten).
    """

    def __init__(
        self,
        subject: Callable[[], Awaitable[TamperSubject]],
        *,
        time_limit_s: float = 20.0,
        memory_limit_bytes: int = 96 << 20,
        mutation_filter: Callable[[str], bool] | None = None,
    ) -> None:
        self._subject = subject
        self._time_limit_s = time_limit_s
        self._memory_limit = memory_limit_bytes
        self._keep = mutation_filter or (lambda _: True)

    @staticmethod
    async def fill(subject: TamperSubject) -> None:
        """Write the suite's scenario into a fresh subject's store."""
        async with Engine(subject.store, store_retry_s=0.2) as engine:
            await populate(engine)

    async def run(self) -> TamperReport:
        """Run every case; the report lists what did not fail safe."""
        report = TamperReport()
        template = await self._subject()
        try:
            await self.fill(template)
            for (table, column, ordinal), mutation in await self._plan(template):
                subject = await template.clone()
                try:
                    await self._case(
                        report, subject, (table, column, ordinal), mutation
                    )
                finally:
                    await subject.drop()
        finally:
            await template.drop()
        return report

    async def _plan(
        self, subject: TamperSubject
    ) -> list[tuple[tuple[str, str, int], Mutation]]:
        """One row per (table, column), preferring a finished run's, and its mutations."""
        chosen: dict[tuple[str, str], tuple[int, StoredField]] = {}
        ordinals: Counter[tuple[str, str]] = Counter()
        for field in await subject.fields():
            key = (field.table, field.column)
            ordinal = ordinals[key]
            ordinals[key] += 1
            if key not in chosen or (
                field.run_id == "t-done" and chosen[key][1].run_id != "t-done"
            ):
                chosen[key] = (ordinal, field)
        return [
            ((table, column, ordinal), mutation)
            for (table, column), (ordinal, field) in sorted(chosen.items())
            for mutation in mutations_of(field.value)
            if self._keep(mutation.name)
        ]

    async def _case(
        self,
        report: TamperReport,
        subject: TamperSubject,
        where: tuple[str, str, int],
        m: Mutation,
    ) -> None:
        table, column, ordinal = where
        fields = [
            f for f in await subject.fields() if (f.table, f.column) == (table, column)
        ]
        if ordinal >= len(fields):
            return  # this fill wrote fewer such rows: nothing to damage
        target = fields[ordinal]
        if not await self._damage(subject, target, fields, m):
            report.refused_by_store += 1
            return
        report.cases += 1
        await self.examine(report, subject, target, m.name)

    async def examine(
        self,
        report: TamperReport,
        subject: TamperSubject,
        damaged: StoredField,
        mutation: str,
    ) -> None:
        """Resume, list, show and load a store damaged at `damaged`; note failures.

        For tests that damage a filled store their own way (whole rows, say):
        `fill` a subject, damage it, then call this.
        """
        EXECUTED.clear()
        store = await subject.reopen()
        engine = Engine(store, store_retry_s=0.2, max_payload_bytes=MAX_PAYLOAD_BYTES)
        table, column = damaged.table, damaged.column
        try:
            for action, call in actions(engine, subject.url):
                report.actions += 1
                problem = await self._act(report, call)
                if problem is not None:
                    report.failures.append(
                        TamperFailure(table, column, mutation, action, problem)
                    )
        finally:
            with contextlib.suppress(ResumableError):
                await engine.close()
        reran = self._reran(damaged)
        if reran:
            report.failures.append(
                TamperFailure(table, column, mutation, "all", f"re-ran {reran}")
            )

    async def _damage(
        self,
        subject: TamperSubject,
        target: StoredField,
        fields: list[StoredField],
        mutation: Mutation,
    ) -> bool:
        if not mutation.swap:
            return await subject.write(target, mutation.value)
        other = next(
            (
                f
                for f in fields
                if f.run_id is not None
                and f.run_id != target.run_id
                and f.value != target.value
            ),
            None,
        )
        if other is None or target.run_id is None:
            return False
        return await subject.write(target, other.value) and await subject.write(
            other, target.value
        )

    async def _act(
        self, report: TamperReport, call: Callable[[], Awaitable[Any]]
    ) -> str | None:
        started = time.monotonic()
        tracemalloc.start()
        try:
            await asyncio.wait_for(call(), self._time_limit_s)
        except ResumableError as exc:
            report.typed_errors[type(exc).__name__] += 1
        except TimeoutError:
            return f"did not end within {self._time_limit_s} s"
        except Exception as exc:  # noqa: BLE001 - exactly what the suite looks for
            return f"untyped {type(exc).__module__}.{type(exc).__qualname__}: {exc}"[
                :300
            ]
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            report.peak_bytes = max(report.peak_bytes, peak)
            report.slowest_s = max(report.slowest_s, time.monotonic() - started)
        if peak > self._memory_limit:
            return f"allocated {peak / 2**20:.0f} MiB"
        return None

    def _reran(self, damaged: StoredField) -> list[tuple[str, str]]:
        """Completed steps of the finished run that ran again though their rows were intact."""
        if damaged.run_id == "t-done":
            return []  # its damaged run row or step row may rightly re-run a step
        return [key for key, n in EXECUTED.items() if key[0] == "t-done" and n]
