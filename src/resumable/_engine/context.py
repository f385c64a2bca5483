"""Which run and step the current code is executing in: contextvars, never globals.

Also what an execution runs with (`Runtime`) and the observer seam it reports to
(`Observer`, whose hooks receive these; `observe` combines observers).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from resumable._engine.lease import Tenure
from resumable._engine.ledger import Spend
from resumable.errors import NotInRun, ResumableError
from resumable.usage import Usage

if TYPE_CHECKING:
    from resumable._engine.clock import Clock
    from resumable._engine.probe import CheckProbe
    from resumable._engine.retention import GcReport
    from resumable.pricing import PriceTable
    from resumable.serde import Serde
    from resumable.serde.chunked import SealedStream
    from resumable.stores.capabilities import KeepsFeeds, StreamsPayloads
    from resumable.stores.protocol import RunRecord, RunStore, StepRecord
    from resumable.stores.step_cache import CacheEntry, SupportsStepCache


class Observer:
    """Receives engine events; every method here does nothing.

    `execution_*` hooks bracket one execution of a run (from taking its lease to
    its end or suspension); `step_*` bracket one attempt of a step or child run
    that executes; `step_replayed` is a recorded outcome returned without running.
    """

    async def run_created(self, runtime: Runtime, run: RunRecord) -> None:
        """A run was recorded (`run`, `start`, `enqueue`), before anything executes it."""

    async def execution_started(self, ctx: RunContext, run: RunRecord) -> None:
        """An execution took the run's lease and loaded its journal."""

    def execution_ended(
        self, ctx: RunContext, outcome: str, error: BaseException | None
    ) -> None:
        """An execution stopped.

        `outcome` is the run's new status (succeeded, failed, waiting, sleeping),
        or why it stopped without one: lease_lost, write_failed, cancelled.
        """

    def replay_finished(self, ctx: RunContext) -> None:
        """The execution reached its first step that executes (or its end)."""

    def step_started(
        self, ctx: RunContext, seq: int, name: str, attempt: int, *, child: bool
    ) -> Any:
        """An attempt starts; what it returns is handed back to `step_ended`."""
        return None

    def step_ended(
        self,
        ctx: RunContext,
        scope: Any,
        *,
        error: BaseException | None,
        retry_delay_s: float | None,
        calls: Sequence[Usage],
    ) -> None:
        """An attempt ended (committed, or stopped by `error`).

        `retry_delay_s` is set when a failed attempt will be retried after it;
        `calls` are the LLM calls the attempt made.
        """

    def step_replayed(self, ctx: RunContext, record: StepRecord) -> None:
        """A recorded step outcome was returned without running the step."""

    def usage_replayed(self, ctx: RunContext, calls: Sequence[Usage]) -> None:
        """Recorded LLM calls were reused by a replay instead of being made again."""

    def checkpoint_written(
        self,
        ctx: RunContext,
        record: StepRecord,
        *,
        duration_s: float,
        error: BaseException | None,
    ) -> None:
        """A step record's commit ended (with its retries), or failed with `error`."""

    def store_error(self, ctx: RunContext, error: BaseException) -> None:
        """A store write failed and will be retried (`durably`)."""

    def feed_appended(
        self, ctx: RunContext, kind: str, *, entries: int, size: int
    ) -> None:
        """The run appended `entries` new entries of `kind` to its feed.

        `kind` is `event` (a publish), `attempt` (a streaming step's execution
        began) or `chunk` (its chunks, and its end marker); `size` their bytes.
        """

    def commit_batch_written(self, store: str, size: int) -> None:
        """A store wrote `size` step commits in one transaction.

        Only stores that group commits (`ReportsCommitBatches`) report this;
        `store` is its kind (postgresql, ...).
        """

    def lease_renewed(self, ctx: RunContext, *, late_s: float) -> None:
        """A heartbeat renewed the lease, `late_s` after it was due."""

    def lease_lost(self, ctx: RunContext) -> None:
        """The execution lost its lease (another owner took the run)."""

    def lease_taken_over(self, run_id: str) -> None:
        """This engine took over a run whose owner died holding its lease."""

    def run_claimed(self, run: RunRecord, *, queue_wait_s: float | None) -> None:
        """A worker claimed the run; `queue_wait_s` for its first claim."""

    def gc_collected(self, report: GcReport) -> None:
        """A retention pass ended."""

    def cache_looked_up(
        self, ctx: RunContext, step: str, *, hit: bool, saved: list[Usage]
    ) -> None:
        """A cached step's key was looked up: served (`hit`) or executed.

        `saved`: the usage of the calls a hit did not make.
        """

    def agent_started(self, ctx: RunContext, agent: str) -> Any:
        """An agent run starts in the workflow (an integration's `Runner.run`).

        The model and tool steps the agent makes come between this and
        `agent_ended`, which gets what this returns.
        """
        return None

    def agent_ended(
        self, ctx: RunContext, scope: Any, *, error: BaseException | None
    ) -> None:
        """The agent run ended, or failed with `error` (None when it suspended)."""

    def tick_started(self, schedule: str, tick_ms: int, *, late: bool) -> Any:
        """A worker starts a schedule's tick (`late`: a missed one caught up).

        What it returns is handed back to `tick_ended`.
        """
        return None

    def tick_ended(
        self, scope: Any, *, run_id: str, created: bool, error: BaseException | None
    ) -> None:
        """The tick's run was recorded (`created`: by this worker), or `error`."""

    def ticks_counted(
        self, schedule: str, *, fired: int, caught_up: int, skipped: int
    ) -> None:
        """A schedule's ticks moved on: once per move, by the worker that moved them.

        `fired`: the latest due tick (0 or 1); `caught_up`: missed ticks started
        late; `skipped`: missed ticks passed over by the catch-up policy.
        """


@dataclass(frozen=True, slots=True, kw_only=True)
class Runtime:
    """What executing a run needs from its Engine."""

    store: RunStore
    serde: Serde
    clock: Clock
    owner: str
    lease_ttl_s: float
    store_retry_s: float
    """How long a failed store write is retried (with backoff) before the run stops."""
    prices: PriceTable
    """Prices for the ledger and for dollar budgets."""
    run_child: Callable[..., Awaitable[Any]]
    """Start or resume a child run to its end: `(spec, args, kwargs, *, run_id,
    parent_id, retry_failed)`."""
    observer: Observer | None = None
    """Told about executions, steps and writes (traces, metrics); None costs nothing."""
    metering: bool = True
    """Meter the openai/anthropic SDK calls each step attempt makes (`metering`)."""
    times_out_writes: bool = True
    """Give each store write at most the rest of `store_retry_s` (`commits.durably`);
    False for a store whose writes wait on no server (`capabilities.LocalWrites`)."""
    uploads: StreamsPayloads | None = None
    """Where large results go as they are sealed, a chunk at a time, if the store
    streams uploads (`StreamsPayloads`): see `dumps_result`."""
    step_cache: SupportsStepCache | None = None
    """The step cache's index, if the store keeps one (`@step(cache=...)`)."""
    feeds: KeepsFeeds | None = None
    """Where `publish` and streaming steps append, if the store keeps feeds."""
    dumps_result: Callable[..., bytes | SealedStream] = field(init=False, repr=False)
    """How a step's or a run's result is sealed for its row: `serde.dumps`, or,
    where there are `uploads`, `serde.dumps_stream`, whose large frames are made on
    demand (`commits.put_sealed` uploads them; the row keeps the reference).
    Raises SerializationError as `Serde.dumps`."""

    def __post_init__(self) -> None:
        dumps = self.serde.dumps if self.uploads is None else self.serde.dumps_stream
        object.__setattr__(self, "dumps_result", dumps)  # chosen once, not per result


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """A run's spending limits (from `@workflow(budget_usd=, budget_tokens=)`)."""

    usd: float | None = None
    tokens: int | None = None


@dataclass(slots=True, eq=False, kw_only=True)
class RunContext:
    """The state of one execution of one run."""

    runtime: Runtime
    run_id: str
    workflow: str
    fence: int
    journal: dict[int, StepRecord]
    retry_failed: bool
    loop: asyncio.AbstractEventLoop
    loop_thread: int = field(default_factory=threading.get_ident)
    """The thread `loop` runs on, where the context is made: a call made on
    another thread comes from a plain `def` workflow's."""
    next_seq: int = 1
    failure: ResumableError | None = None
    """Set when a write was lost or refused: every later step raises it, and the run
    ends with it whatever the workflow does, so nothing continues unrecorded."""
    inflight: set[asyncio.Task[Any]] = field(default_factory=set)
    suspensions: list[Any] = field(default_factory=list)
    """Every wait_for/sleep that unwound the workflow in this execution."""
    replayed_seqs: list[int] = field(default_factory=list)
    """The seqs this execution replayed, in the order it replayed them (for its
    ledger entry: `seq_ranges`)."""
    replayed_usage: list[Usage] = field(default_factory=list)
    """Usage of the recorded calls this execution replayed instead of re-calling."""
    replays_noted: int = 0
    noting: asyncio.Future[None] | None = None
    """The ledger entry write in flight, if any."""
    recording: list[asyncio.Future[None]] = field(default_factory=list)
    """Writes of values `now()`, `uuid4()`, `random()` drew in an async workflow,
    in flight until `commits.recorded_first` awaits them."""
    """How many replays the execution's ledger entry already counts."""
    cache_entries: list[CacheEntry] = field(default_factory=list)
    """Step cache entries to write (`step_cache.write_entries`), in one batch when
    the execution ends: off the steps' path, since an entry lost to a crash is
    only a later miss."""
    spent: Spend = field(default_factory=Spend)
    """What the run has incurred so far, in every execution (for budgets)."""
    spend_sinks: dict[int, Callable[[list[Usage]], None]] = field(default_factory=dict)
    """Who else counts the calls of the step at a seq as each attempt records them:
    a `map_steps` batch, for its progress line and its tokens-per-minute limit."""
    budget: Budget | None = None
    check: CheckProbe | None = None
    """Set by `Engine.check` only: every journaled call is answered from the journal
    or stops the check; nothing executes and nothing is written."""
    observed: dict[str, Any] = field(default_factory=dict)
    """What the runtime's observers keep about this execution (its span, timings)."""
    is_replaying: bool = True
    """True until the execution runs its first step (replay ends there)."""
    ended_as: str | None = None
    """The status this execution recorded for the run, once it has."""
    published: dict[tuple[int, int], int] | None = None
    """How many events each position published in this execution (`events.publish`):
    made on the first publish, so a run that publishes nothing pays nothing."""
    tenure: Tenure | None = None
    """How long the lease may be trusted without asking the store (`lease.Tenure`);
    None for `Engine.check`, which executes nothing."""

    @property
    def replayed(self) -> int:
        """How many recorded calls this execution replayed."""
        return len(self.replayed_seqs)

    def take_seq(self) -> int:
        """The next step number; taken when a step is called, not when it is awaited."""
        seq = self.next_seq
        self.next_seq = seq + 1
        return seq


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """What `current_run()` tells the code it is running in."""

    run_id: str
    workflow: str
    seq: int | None = None
    """The step's number in the journal; None in the workflow body."""
    step: str | None = None
    attempt: int | None = None
    """1 for the first attempt of a step, 2 for its first retry, and so on."""
    calls: list[Usage] | None = field(default=None, repr=False, compare=False)

    def record_usage(
        self,
        *,
        model: str | None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cached_input_tokens: int = 0,
        cache_write_tokens: int = 0,
        cost_usd: float | None = None,
        provider: str | None = None,
    ) -> None:
        """Add an LLM call's usage to this step, for providers the meter does not see.

        Calls made through the `openai` and `anthropic` SDKs inside a step are
        metered already, whatever the step returns: do not record them again.
        Use this for other providers (their SDK or plain HTTP)::

            @step
            async def ask_mistral(question: str) -> str:
                r = await mistral.chat.complete_async(model="mistral-small-latest",
                                                      messages=[...])
                current_run().record_usage(
                    model="mistral-small-latest", provider="mistral",
                    input_tokens=r.usage.prompt_tokens,
                    output_tokens=r.usage.completion_tokens,
                )
                return r.choices[0].message.content

        A model missing from the engine's price table is counted in tokens and
        shown as unpriced; pass `cost_usd` when the provider states the cost.

        Raises:
            NotInRun: called outside a step.
        """
        if self.calls is None:
            raise NotInRun(call="record_usage()", where="inside a @step")
        self.calls.append(
            Usage(
                model=model,
                provider=provider,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cached_input_tokens=cached_input_tokens,
                cache_write_tokens=cache_write_tokens,
                cost_usd=cost_usd,
            )
        )

    @property
    def idempotency_key(self) -> str:
        """`run_id:seq`: stable across retries and re-executions of this step call.

        Pass it to outside services so a step that runs twice (the in-flight step
        after a crash) has its side effect applied once.
        """
        return f"{self.run_id}:{self.seq}" if self.seq is not None else self.run_id


_run: ContextVar[RunContext | None] = ContextVar("resumable_run", default=None)
# the step an attempt is executing: (run context, seq, step name, attempt, usage of
# the attempt). A tuple, not a RunInfo: it is set on every attempt and current_run()
# is rarely asked, so the RunInfo is built only then.
StepScope = tuple[RunContext, int, str, int, list[Usage]]
_step: ContextVar[StepScope | None] = ContextVar("resumable_step", default=None)


def seq_ranges(seqs: list[int]) -> list[list[int]]:
    """Replayed seqs as sorted `[first, last]` ranges, for a ledger entry."""
    ranges: list[list[int]] = []
    for seq in seqs:
        if ranges and ranges[-1][1] == seq - 1:
            ranges[-1][1] = seq  # the usual case: replay goes in seq order
        else:
            ranges.append([seq, seq])
            ranges.sort()  # gather() may replay out of order: rare, and short lists
    return ranges


def active_run() -> RunContext | None:
    """The run whose workflow body is executing here, if any (None inside a step)."""
    return _run.get() if _step.get() is None else None


def def_workflow_run() -> RunContext | None:
    """The run whose plain `def` workflow is calling, from its own thread; else None.

    That thread cannot await: what runs async (a wait, a batch of steps) runs on
    the run's loop for it, or is refused. An `async def` body runs on the loop.
    """
    ctx = active_run()
    return ctx if ctx is not None and threading.get_ident() != ctx.loop_thread else None


def current_run() -> RunInfo:
    """The run (and step, inside one) that the calling code is executing in.

    Raises:
        NotInRun: called outside any run.
    """
    scope = _step.get()
    if scope is not None:
        step_ctx, seq, step, attempt, calls = scope
        return RunInfo(
            run_id=step_ctx.run_id,
            workflow=step_ctx.workflow,
            seq=seq,
            step=step,
            attempt=attempt,
            calls=calls,
        )
    ctx = _run.get()
    if ctx is None:
        raise NotInRun(
            call="current_run()",
            where="from a @workflow or @step executed by Engine.run",
        )
    return RunInfo(run_id=ctx.run_id, workflow=ctx.workflow)
