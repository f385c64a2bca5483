"""The cost ledger: what every run spent on LLM calls, and what replay saved.

Each step record carries the usage of every call each of its attempts made (metered
where the call happened, at the `openai`/`anthropic` SDK: see `metering`; read from
an OpenAI or Anthropic response the step returned that the meter did not see; plus
`current_run().record_usage(...)`), each tagged with the execution (fence) that made
the call. A call whose usage could not be known is kept as an unmetered call. Each execution that
replayed steps writes one ledger entry, (`JournalKind.LEDGER`, indexed by its fence), summing the
usage it reused instead of re-calling. Everything here is derived from those
stored records, so any process computes the same ledger; dollars are priced
when read, from the engine's PriceTable, and a model without a price is counted
in tokens and reported as unpriced, never guessed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from resumable._engine.damage import reading
from resumable._engine.journal import get_run, refuse_archived
from resumable._plural import plural
from resumable.pricing import PRICES_AS_OF, PriceTable
from resumable.serde import Serde
from resumable.stores.checks import checked_steps
from resumable.stores.kinds import JournalKind, index_of
from resumable.stores.places import step_place
from resumable.stores.protocol import RunStore, StepRecord
from resumable.usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """Tokens and dollars of some LLM calls."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    """Dollars of the calls whose price is known."""
    unpriced_calls: int = 0
    """Calls to models with no known price: in the token counts, not in cost_usd."""
    unmetered_calls: int = 0
    """Calls whose usage could not be known (a response without usage, a stream
    cut short): in `calls`, not in the tokens nor in cost_usd, which are then a
    lower bound."""

    @property
    def total_tokens(self) -> int:
        """Every input and output token."""
        return (
            self.input_tokens
            + self.cached_input_tokens
            + self.cache_write_tokens
            + self.output_tokens
        )

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
            unmetered_calls=self.unmetered_calls + other.unmetered_calls,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSpend:
    """One execution of a run (one lease): what it called and what it replayed."""

    fence: int
    incurred: Spend
    reused: Spend
    replayed_steps: int
    replayed_seqs: tuple[tuple[int, int], ...] | None = None
    """The seqs it replayed, as `(first, last)` ranges; None if its entry predates
    this record (then only `replayed_steps` is known)."""
    cached_steps: int = 0
    """Steps it served from the step cache (their calls are in `reused` and `cached`)."""
    cached: Spend = field(default_factory=Spend)
    """The calls the steps it served from the step cache saved."""

    def replayed(self, seq: int) -> bool | None:
        """Whether this execution replayed the call at `seq` (None: not recorded)."""
        if self.replayed_seqs is None:
            return None
        return any(first <= seq <= last for first, last in self.replayed_seqs)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ledger:
    """A run's spend: incurred by calls actually made, reused by replays."""

    run_id: str
    incurred: Spend
    """Every call the run made, in every execution, failed attempts included."""
    reused: Spend
    """Every recorded call replayed instead of re-called, summed over executions;
    the calls saved by steps served from the step cache included."""
    executions: tuple[ExecutionSpend, ...]
    unpriced_models: tuple[str, ...]
    """Models seen with no price in the table: their dollars are not counted."""
    prices_as_of: date = field(default=PRICES_AS_OF)
    cached: Spend = field(default_factory=Spend)
    """The calls saved by steps served from the step cache (part of `reused`)."""
    cached_steps: int = 0
    """How many steps were served from the step cache."""


def spend_of(
    usages: Iterable[Usage], prices: PriceTable, unpriced: set[str] | None = None
) -> Spend:
    """The Spend of some calls; models with no price are added to `unpriced`."""
    total = Spend()
    for usage in usages:
        if not usage.is_metered:
            total = total + Spend(calls=1, unmetered_calls=1)
            continue
        cost = prices.cost(usage)
        if cost is None and unpriced is not None:
            unpriced.add(usage.model or "(unknown model)")
        total = total + Spend(
            calls=1,
            input_tokens=usage.input_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost or 0.0,
            unpriced_calls=1 if cost is None else 0,
        )
    return total


def usage_entries(raw: Any, *, place: str) -> list[tuple[int, Usage]]:
    """Decoded `[{"fence": n, ...Usage fields}]` as (fence, Usage) pairs.

    A step served from the step cache (`encode_cached`) gives the calls it saved,
    under the fence of the execution that was served.

    Raises:
        CorruptCheckpointError: `raw` is not what `encode_entries` wrote.
    """
    entries = []
    with reading(place):
        if isinstance(raw, dict):
            fence = raw.get("fence", 0)
            if type(fence) is not int:
                raise TypeError(f"fence {fence!r} is not a number")
            return [(fence, Usage.from_dict(dict(u))) for u in raw.get("calls") or ()]
        for item in raw or ():
            data = dict(item)
            fence = data.pop("fence", 0)
            if type(fence) is not int:
                raise TypeError(f"fence {fence!r} is not a number")
            entries.append((fence, Usage.from_dict(data)))
    return entries


def encode_entries(entries: Iterable[tuple[int, Usage]]) -> list[dict[str, object]]:
    """(fence, Usage) pairs as plain data for a step record."""
    return [{"fence": fence, **usage.to_dict()} for fence, usage in entries]


def encode_cached(
    *, run_id: str, seq: int, fence: int, calls: Iterable[Usage]
) -> dict[str, object]:
    """The usage of a step served from the step cache.

    Where its value came from (run, seq), the execution served (fence), and the
    calls that saved.
    """
    return {
        "cached_from": [run_id, seq],
        "fence": fence,
        "calls": [usage.to_dict() for usage in calls],
    }


def cached_source(raw: Any) -> tuple[str, int] | None:
    """The (run, seq) a step's value was served from, if decoded usage `raw` says so."""
    if not isinstance(raw, dict):
        return None
    source = raw.get("cached_from")
    if (
        isinstance(source, list)
        and len(source) == 2
        and isinstance(source[0], str)
        and type(source[1]) is int
    ):
        return source[0], source[1]
    return None


def build(
    run_id: str,
    records: Iterable[tuple[StepRecord, Any]],
    prices: PriceTable,
) -> Ledger:
    """The ledger of a run from its own journal records and their decoded usage.

    `records` pairs each record with its decoded usage (steps) or its decoded
    entry (the records of kind `JournalKind.LEDGER`).
    """
    unpriced: set[str] = set()
    incurred: dict[int, list[Usage]] = {}
    reused: dict[int, tuple[int, list[Usage]]] = {}
    seqs: dict[int, tuple[tuple[int, int], ...]] = {}
    cached: dict[int, list[Usage]] = {}
    served: dict[int, int] = {}
    for record, decoded in records:
        place = f"run {run_id!r} step #{record.seq} usage"
        if record.kind is JournalKind.LEDGER:
            fence = index_of(record.seq)  # the execution that wrote the entry
            with reading(place):
                replayed = int(decoded.get("replayed_steps", 0))
                if "replayed_seqs" in decoded:
                    seqs[fence] = tuple(
                        (int(first), int(last))
                        for first, last in decoded["replayed_seqs"]
                    )
            entries = usage_entries(decoded.get("usage"), place=place)
            reused[fence] = (replayed, [usage for _, usage in entries])
        elif cached_source(decoded) is not None:  # served from the step cache
            entries = usage_entries(decoded, place=place)
            fence = decoded["fence"]
            served[fence] = served.get(fence, 0) + 1
            cached.setdefault(fence, []).extend(usage for _, usage in entries)
        else:
            for fence, usage in usage_entries(decoded, place=place):
                incurred.setdefault(fence, []).append(usage)
    executions = tuple(
        ExecutionSpend(
            fence=fence,
            incurred=spend_of(incurred.get(fence, ()), prices, unpriced),
            reused=spend_of(reused.get(fence, (0, []))[1], prices, unpriced),
            replayed_steps=reused.get(fence, (0, []))[0],
            replayed_seqs=seqs.get(fence, () if fence not in reused else None),
            cached_steps=served.get(fence, 0),
            cached=spend_of(cached.get(fence, ()), prices, unpriced),
        )
        for fence in sorted(incurred.keys() | reused.keys() | cached.keys())
    )
    executions = tuple(
        dataclasses.replace(e, reused=e.reused + e.cached) if e.cached_steps else e
        for e in executions
    )
    return Ledger(
        run_id=run_id,
        incurred=sum((e.incurred for e in executions), Spend()),
        reused=sum((e.reused for e in executions), Spend()),
        executions=executions,
        unpriced_models=tuple(sorted(unpriced)),
        cached=sum((e.cached for e in executions), Spend()),
        cached_steps=sum(e.cached_steps for e in executions),
    )


async def read_ledger(
    store: RunStore, serde: Serde, prices: PriceTable, run_id: str
) -> Ledger:
    """`Engine.ledger`: the run's ledger from its own journal (never a fork's parent's).

    Raises:
        RunNotFound: there is no such run.
    """
    await get_run(store, run_id)
    steps = await store.load_journal(run_id)
    if not steps:
        await refuse_archived(store, run_id)
    return ledger_of(run_id, checked_steps(run_id, steps), serde, prices)


def ledger_of(
    run_id: str, journal: Iterable[StepRecord], serde: Serde, prices: PriceTable
) -> Ledger:
    """The ledger of a run from its journal as read: only its own records count.

    `journal` may hold the steps a fork shares (`journal.load_journal`): those
    belong to the run they were recorded in, and are left out.
    """
    records = []
    for record in journal:
        if record.run_id != run_id:
            continue
        place = step_place(run_id, record.seq, record.name)
        if record.kind is JournalKind.LEDGER:
            records.append((record, serde.loads(record.output or b"", place=place)))
        elif record.usage is not None:
            records.append((record, serde.loads(record.usage, place=place + " usage")))
    return build(run_id, records, prices)


def dollars_text(
    cost_usd: float, *, calls: int, unpriced_calls: int, unmetered_calls: int = 0
) -> str:
    """The dollars of some calls as people read them: never $0 for an unknown cost.

    "$0.0123" when every call is priced and metered, "unpriced" when no call is
    priced, and "$0.0123 + 2 unpriced calls + 1 unmetered call" when some are not:
    an unpriced call's tokens are known but not its price, an unmetered call's
    usage is not known at all.
    """
    unknown = [
        plural(count, f"{what} call")
        for count, what in (
            (unpriced_calls, "unpriced"),
            (unmetered_calls, "unmetered"),
        )
        if count
    ]
    if not unknown:
        return f"${cost_usd:.4f}"
    if unpriced_calls >= calls:
        return "unpriced"
    if calls > unpriced_calls + unmetered_calls:  # some calls were priced
        unknown.insert(0, f"${cost_usd:.4f}")
    return " + ".join(unknown)


def spend_text(spend: Spend) -> str:
    """A Spend in one line: "2 calls, 1,234 tok, $0.0012" (or "..., unpriced")."""
    calls = plural(spend.calls, "call")
    if spend.unmetered_calls >= spend.calls:  # no usage known: no tokens to show
        return f"{calls}, {spend.unmetered_calls} unmetered"
    dollars = dollars_text(
        spend.cost_usd,
        calls=spend.calls,
        unpriced_calls=spend.unpriced_calls,
        unmetered_calls=spend.unmetered_calls,
    )
    return f"{calls}, {spend.total_tokens:,} tok, {dollars}"
