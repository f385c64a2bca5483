"""The tamper suite: damage what a store wrote, then check the library fails safe.

A store's rows are the one input the library reads back without having produced
it in this process, so it must treat them as hostile. For every table (or key
family) and column (or field) a store writes, the suite builds a fresh store,
fills it through the public API (finished, failed, waiting, forked and child
runs, a ledger, a state thread long enough to be packed), damages that one value
(`mutations_of`) and then resumes every run, lists, shows and loads. Each action
must end as it would on a healthy store or with a `ResumableError`, within a
time limit and a memory bound, and a step whose own row was not damaged never
runs again. Values are decoded only into types the program registered.

`TamperSubject` is what a store gives the suite: raw access to its rows. Ours
are in `resumable._tamper_subjects`; a third-party store writes its own and runs
`TamperSuite(its_factory).run()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io
import json
import struct
import threading
import time
import tracemalloc
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from resumable._engine.context import current_run
from resumable._engine.decorators import step, workflow
from resumable._engine.engine import Engine
from resumable._engine.waits import wait_for
from resumable.errors import ResumableError
from resumable.stores.protocol import Store

__all__ = [
    "Mutation",
    "StoredField",
    "TamperFailure",
    "TamperReport",
    "TamperSubject",
    "TamperSuite",
    "decompression_bomb",
    "mutations_of",
    "plain_frame",
]

MAX_PAYLOAD_BYTES = 1 << 20
"""The engines under test refuse payloads past this (Engine(max_payload_bytes=))."""

_BOMB_SIZE = 1 << 30


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
    def store(self) -> Store:
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

    async def reopen(self) -> Store:
        """A new Store object on the same data, with nothing cached."""
        ...

    async def clone(self) -> TamperSubject:
        """A new subject holding a copy of these rows (cheaper than filling one)."""
        ...

    async def drop(self) -> None:
        """Delete the store and close every connection."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Mutation:
    """One way to damage a value."""

    name: str
    value: Any
    swap: bool = False
    """Exchange the value with the same column of another run's row instead."""


# --------------------------------------------------------------- hostile values


def plain_frame(body: bytes, *, compressed: bool = False) -> bytes:
    """A plaintext frame around `body` with a valid checksum (see serde.integrity)."""
    header = bytes((1, 0x01 if compressed else 0))
    checksum = zlib.crc32(body, zlib.crc32(header))
    return header + struct.pack(">I", checksum) + body


_BOMBS: dict[bool, bytes] = {}
_BOMBS_LOCK = threading.Lock()


def decompression_bomb(*, declares_size: bool = True) -> bytes:
    """A ~32 KB zstd frame of 1 GiB of zeros; optionally without its declared size."""
    with _BOMBS_LOCK:
        if declares_size not in _BOMBS:
            import zstandard

            compressor = zstandard.ZstdCompressor(
                level=1, write_content_size=declares_size
            )
            out = io.BytesIO()
            zeros = bytes(1 << 20)
            size = _BOMB_SIZE if declares_size else -1
            with compressor.stream_writer(out, size=size, closefd=False) as writer:
                for _ in range(_BOMB_SIZE // len(zeros)):
                    writer.write(zeros)
            _BOMBS[declares_size] = out.getvalue()
        return _BOMBS[declares_size]


def _json_frame(value: object) -> bytes:
    return plain_frame(json.dumps(value).encode())


_LC_CONSTRUCTOR = {
    "lc": 1,
    "type": "constructor",
    "id": ["langchain_core", "messages", "ai", "AIMessage"],
    "kwargs": {"content": "injected"},
}


def _bytes_mutations(value: bytes) -> list[Mutation]:
    middle = len(value) // 2
    mutations = [
        Mutation("empty bytes", b""),
        Mutation("truncated to half", value[:middle]),
        Mutation("NULL", None),
        Mutation("text for bytes", value.decode("latin-1")),
        Mutation("unknown type tag", _json_frame({"~": "os:system", "v": {"x": 1}})),
        Mutation("unknown builtin tag", _json_frame({"~": "nope", "v": 1})),
        Mutation("LangChain constructor JSON", _json_frame(_LC_CONSTRUCTOR)),
        Mutation("list for an object", _json_frame([1, 2, 3])),
        Mutation("deeply nested", plain_frame(b"[" * 200_000 + b"]" * 200_000)),
        Mutation("not UTF-8", plain_frame(b"\xff\xfe{")),
        Mutation("huge number", _json_frame(10**4000)),
        Mutation("swapped with another run's", value, swap=True),
    ]
    if value:
        for at in sorted({0, middle, len(value) - 1}):
            flipped = bytearray(value)
            flipped[at] ^= 0x10
            mutations.append(Mutation(f"bit flipped at byte {at}", bytes(flipped)))
    if _has_zstd():
        mutations.append(
            Mutation("zstd bomb", plain_frame(decompression_bomb(), compressed=True))
        )
        mutations.append(
            Mutation(
                "zstd bomb of unstated size",
                plain_frame(decompression_bomb(declares_size=False), compressed=True),
            )
        )
    return mutations


def _text_mutations(value: str) -> list[Mutation]:
    return [
        Mutation("empty text", ""),
        Mutation("NULL", None),
        Mutation("long text", "x" * 100_000),
        Mutation("number for text", 12345),
        Mutation("JSON garbage", '{"~'),
        Mutation("text with NUL", value + "\x00"),
        Mutation("swapped with another run's", value, swap=True),
    ]


def _number_mutations(value: float) -> list[Mutation]:
    return [
        Mutation("NULL", None),
        Mutation("negative", -1),
        Mutation("zero", 0),
        Mutation("huge", 2**63 - 1),
        Mutation("text for a number", "abc"),
        Mutation("fraction", 1.5),
        Mutation("swapped with another run's", value, swap=True),
    ]


def mutations_of(value: Any) -> list[Mutation]:
    """The ways the suite damages a stored value of this type."""
    if isinstance(value, bytes | bytearray | memoryview):
        return _bytes_mutations(bytes(value))
    if isinstance(value, str):
        return _text_mutations(value)
    if isinstance(value, int | float):
        return _number_mutations(value)
    return [Mutation("text for a NULL", "x"), Mutation("number for a NULL", 7)]


def _has_zstd() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------- the scenario

EXECUTED: Counter[tuple[str, str]] = Counter()
"""(run id, step) -> how many times the suite's steps ran (process-wide, reset per case)."""


@dataclasses.dataclass(frozen=True)
class TamperScore:
    """A registered type inside stored values (named by a step annotation)."""

    label: str
    value: float


def _executed(name: str) -> None:
    EXECUTED[(current_run().run_id, name)] += 1


@step(name="tamper.fetch")
async def _fetch(i: int) -> str:
    _executed("tamper.fetch")
    current_run().record_usage(model="gpt-5-mini", input_tokens=100, output_tokens=20)
    return f"document {i}: " + "lorem ipsum dolor sit amet " * 80


@step(name="tamper.score")
async def _score(i: int) -> TamperScore:
    _executed("tamper.score")
    return TamperScore(label=f"s{i}", value=i / 3)


@step(name="tamper.broken")
async def _broken() -> None:
    _executed("tamper.broken")
    raise RuntimeError("this step always fails")


@workflow(name="resumable.tamper:child")
async def _child(i: int) -> TamperScore:
    return await _score(i + 100)


@workflow(name="resumable.tamper:flow")
async def _flow(n: int) -> dict[str, Any]:
    texts = [await _fetch(i) for i in range(n)]
    scores = list(await asyncio.gather(*(_score(i) for i in range(n))))
    child = await _child(n)
    return {"texts": texts, "scores": scores, "child": child, "when": (n, b"\x00")}


@workflow(name="resumable.tamper:fails")
async def _fails() -> None:
    await _fetch(0)
    await _broken()


@workflow(name="resumable.tamper:waits")
async def _waits() -> Any:
    await _fetch(1)
    return [await wait_for("approval"), await wait_for("second")]


RUNS = ("t-done", "t-failed", "t-waiting", "t-fork")
THREAD = "t-thread"


async def populate(engine: Engine) -> None:
    """Fill a store through the public API: every kind of row the suite damages."""
    await engine.run(_flow, 2, run_id="t-done")
    with contextlib.suppress(ResumableError):
        await engine.run(_fails, run_id="t-failed")
    waiting = asyncio.ensure_future(engine.run(_waits, run_id="t-waiting"))
    await _until_waiting(engine, "t-waiting", inputs=0)
    await engine.send("t-waiting", "approval", {"ok": True, "by": "tamper"})
    await _until_waiting(engine, "t-waiting", inputs=1)
    waiting.cancel()  # the run stays recorded as waiting for "second"
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await engine.fork("t-done", at_step=1, run_id="t-fork")
    messages: list[Any] = []
    for i in range(18):  # past the 16 saves that pack a thread's older rows
        messages.append({"role": "user", "content": f"message {i} " * 20})
        await engine.save_state(
            THREAD,
            {"messages": list(messages), "score": TamperScore(label="m", value=i)},
            label=f"save {i}",
        )


async def _until_waiting(engine: Engine, run_id: str, *, inputs: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await asyncio.sleep(0.005)
        with contextlib.suppress(ResumableError):  # not created yet
            steps = await engine.history(run_id)
            if (await engine.get(run_id)).status == "waiting" and len(
                steps
            ) > inputs + 1:
                return
    raise AssertionError(f"{run_id} did not wait")


# --------------------------------------------------------------- the actions


async def _resume(engine: Engine, run_id: str) -> None:
    if run_id == "t-waiting":  # resumed, it would wait for this
        with contextlib.suppress(ResumableError):
            await engine.send(run_id, "second", [1, 2])
    await engine.resume(run_id)


async def _show(engine: Engine, run_id: str) -> None:
    await engine.get(run_id)
    for entry in await engine.history(run_id):
        entry.output()
    await engine.ledger(run_id)


async def _load(engine: Engine) -> None:
    await engine.load_state(THREAD)
    for checkpoint in await engine.state_history(THREAD):
        await engine.load_state(THREAD, checkpoint_id=checkpoint.checkpoint_id)


async def _list(engine: Engine) -> None:
    await engine.runs(limit=100)
    await engine.runs(status="failed", limit=100)


def _cli_show(url: str, run_id: str) -> None:
    from resumable.cli import main

    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()) as err,
    ):
        status = main(["show", run_id, "--store", url])
    message = err.getvalue()
    if status not in (0, 1) or "Traceback" in message or "never retrieved" in message:
        raise AssertionError(f"exit {status}, stderr {message[-300:]!r}")


async def _cli_show_elsewhere(url: str, run_id: str) -> None:
    # the CLI runs its own event loop: on a thread of its own, as in a shell
    await asyncio.to_thread(_cli_show, url, run_id)


def _actions(
    engine: Engine, url: str | None
) -> Iterator[tuple[str, Callable[[], Awaitable[Any]]]]:
    yield "list runs", functools.partial(_list, engine)
    for run_id in RUNS:
        yield f"show {run_id}", functools.partial(_show, engine, run_id)
        yield f"resume {run_id}", functools.partial(_resume, engine, run_id)
    if url is not None:  # the CLI opens the store itself
        yield "cli show t-done", functools.partial(_cli_show_elsewhere, url, "t-done")
    yield "load state", functools.partial(_load, engine)


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

    async def run(self) -> TamperReport:
        """Run every case; the report lists what did not fail safe."""
        report = TamperReport()
        template = await self._subject()
        try:
            async with Engine(template.store, store_retry_s=0.2) as engine:
                await populate(engine)
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
        fill a subject with `populate`, damage it, then call this.
        """
        EXECUTED.clear()
        store = await subject.reopen()
        engine = Engine(store, store_retry_s=0.2, max_payload_bytes=MAX_PAYLOAD_BYTES)
        table, column = damaged.table, damaged.column
        try:
            for action, call in _actions(engine, subject.url):
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
