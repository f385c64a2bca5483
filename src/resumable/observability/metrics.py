"""Prometheus metrics fed by engine events: a collector for any registry.

`Metrics()` is both the engine's observer and a prometheus-client collector:
`Engine(url, observers=[metrics])`, then `registry.register(metrics)` (or let
`resumable worker --metrics-port N` serve it). Needs `pip install
'resumable[prometheus]'`.

Labels are bounded by the code, never by the data: workflow, step, error class,
store kind, queue, model. Run ids are never labels.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from resumable._engine.context import Observer, RunContext
from resumable._engine.observe import store_kind
from resumable.errors import BudgetExceeded, StepFailed
from resumable.stores.blobref import written_size
from resumable.stores.protocol import RunQuery, RunRecord, StepRecord
from resumable.usage import Usage

if TYPE_CHECKING:
    from resumable._engine.retention import GcReport
    from resumable.stores.protocol import RunListing

__all__ = ["COUNTED_STATUSES", "METRIC_NAMES", "Metrics"]

_SECONDS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
)
_LONG_SECONDS = (0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400)

COUNTED_STATUSES = ("queued", "running", "waiting", "sleeping", "failed")
"""The statuses `resumable_runs` reports (finished runs grow without bound)."""

# name: (kind, help, labels); kind "histogram" has its buckets in _BUCKETS
_SPECS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "resumable_executions": (
        "counter",
        "Executions of runs that ended, by outcome",
        ("workflow", "outcome"),
    ),
    "resumable_run_failures": (
        "counter",
        "Executions that recorded their run as failed, by error class",
        ("workflow", "error"),
    ),
    "resumable_steps_executed": (
        "counter",
        "Step attempts executed, by outcome (ok, retrying, failed, interrupted)",
        ("workflow", "step", "outcome"),
    ),
    "resumable_steps_replayed": (
        "counter",
        "Step outcomes returned from the journal without running",
        ("workflow", "step"),
    ),
    "resumable_step_cache_lookups": (
        "counter",
        "Lookups of @step(cache=...) keys, by result (hit: served from another "
        "run's journal; miss: executed); the calls a hit saved are counted in "
        "resumable_llm_tokens and resumable_llm_cost_usd with source cached",
        ("workflow", "step", "result"),
    ),
    "resumable_step_errors": (
        "counter",
        "Step attempts that raised, by exception class",
        ("workflow", "step", "error"),
    ),
    "resumable_step_duration_seconds": (
        "histogram",
        "Duration of executed step attempts, commit included",
        ("workflow", "step"),
    ),
    "resumable_checkpoint_write_seconds": (
        "histogram",
        "Duration of a step record's commit, retries included",
        ("store",),
    ),
    "resumable_checkpoint_write_bytes": (
        "counter",
        "Bytes of step records committed",
        ("store",),
    ),
    "resumable_checkpoint_writes": (
        "counter",
        "Step record commits, by outcome (ok, failed)",
        ("store", "outcome"),
    ),
    "resumable_commit_batch_size": (
        "histogram",
        "Step records written per commit transaction, by a store that groups "
        "concurrent commits (PostgreSQL)",
        ("store",),
    ),
    "resumable_store_errors": (
        "counter",
        "Store writes that failed and were retried, by error class",
        ("store", "kind"),
    ),
    "resumable_resume_seconds": (
        "histogram",
        "From an execution's start to the end of its replay (resumed executions)",
        ("workflow",),
    ),
    "resumable_lease_takeovers": (
        "counter",
        "Leases taken from another owner: expired (by a worker's claim or a resume) "
        "or held by a dead process on this host",
        (),
    ),
    "resumable_lease_lost": (
        "counter",
        "Executions stopped because another owner took the run (LeaseLost)",
        ("workflow",),
    ),
    "resumable_lease_renewal_lateness_seconds": (
        "histogram",
        "How late a heartbeat renewed its lease",
        (),
    ),
    "resumable_queue_wait_seconds": (
        "histogram",
        "From enqueue to a worker's first claim",
        ("queue",),
    ),
    "resumable_runs_claimed": ("counter", "Runs a worker claimed", ("queue",)),
    "resumable_llm_tokens": (
        "counter",
        "LLM tokens, incurred by calls made or reused by replays",
        ("workflow", "model", "direction", "source"),
    ),
    "resumable_llm_unmetered_calls": (
        "counter",
        "LLM calls whose usage could not be known (tokens and dollars not counted)",
        ("workflow", "model", "source"),
    ),
    "resumable_llm_unpriced_calls": (
        "counter",
        "LLM calls to models with no known price (tokens counted, dollars not)",
        ("workflow", "model", "source"),
    ),
    "resumable_llm_cost_usd": (
        "counter",
        "LLM dollars (priced models), incurred or reused",
        ("workflow", "model", "source"),
    ),
    "resumable_budget_stops": (
        "counter",
        "Executions stopped by a budget (BudgetExceeded)",
        ("workflow",),
    ),
    "resumable_feed_entries": (
        "counter",
        "Entries appended to runs' feeds: event (publish), attempt (a streaming "
        "step's execution began), chunk (streamed chunks and end markers)",
        ("workflow", "kind"),
    ),
    "resumable_feed_bytes": (
        "counter",
        "Encoded bytes appended to runs' feeds, by kind",
        ("workflow", "kind"),
    ),
    "resumable_gc_deleted": (
        "counter",
        "Rows deleted by gc, by kind (runs, steps, inputs, chunks)",
        ("kind",),
    ),
    "resumable_gc_deleted_bytes": (
        "counter",
        "Payload bytes gc deleted with the runs (inputs, outputs, step results)",
        (),
    ),
    "resumable_schedule_ticks": (
        "counter",
        "Schedule ticks by outcome, counted by the worker that moved the "
        "schedule on: fired (the latest due tick started), caught_up (a missed "
        "tick started late), skipped (a missed tick passed over by the catch-up "
        "policy)",
        ("schedule", "outcome"),
    ),
    "resumable_runs": (
        "gauge",
        "Runs by status, as of the last refresh (capped at 10000)",
        ("status",),
    ),
    "resumable_queue_depth": (
        "gauge",
        "Queued runs per queue, as of the last refresh",
        ("queue",),
    ),
    "resumable_runs_refreshed_timestamp_seconds": (
        "gauge",
        "When resumable_runs was last refreshed",
        (),
    ),
}
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)
_BUCKETS = {
    "resumable_commit_batch_size": _SIZES,
    "resumable_step_duration_seconds": _SECONDS,
    "resumable_checkpoint_write_seconds": _SECONDS,
    "resumable_resume_seconds": _SECONDS,
    "resumable_lease_renewal_lateness_seconds": _SECONDS,
    "resumable_queue_wait_seconds": _LONG_SECONDS,
}


def _exposed(name: str, kind: str) -> tuple[str, ...]:
    if kind == "counter":
        return (f"{name}_total",)
    if kind == "histogram":
        return (f"{name}_bucket", f"{name}_sum", f"{name}_count")
    return (name,)


METRIC_NAMES: frozenset[str] = frozenset(
    exposed for name, (kind, _, _) in _SPECS.items() for exposed in _exposed(name, kind)
)
"""Every series name the collector exposes (alert rules are checked against it)."""


class _Histogram:
    __slots__ = ("bounds", "series")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.series: dict[tuple[str, ...], list[float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        # one count per bucket (not cumulative), then the sum
        row = self.series.get(labels)
        if row is None:
            row = self.series[labels] = [0.0] * (len(self.bounds) + 2)
        row[bisect.bisect_left(self.bounds, value)] += 1
        row[-1] += value


class Metrics(Observer, Collector):
    """Counters and histograms of what the engine did, exposed to Prometheus.

    The values are kept in this object (no global registry): register it on
    yours with `registry.register(metrics)`. `resumable_runs` and
    `resumable_queue_depth` are what the store held at the last
    `await metrics.refresh_runs(store)` (the worker does it on every scrape).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[str, ...], float]] = {
            name: {} for name, spec in _SPECS.items() if spec[0] == "counter"
        }
        self._histograms = {name: _Histogram(b) for name, b in _BUCKETS.items()}
        self._gauges: dict[str, dict[tuple[str, ...], float]] = {
            name: {} for name, spec in _SPECS.items() if spec[0] == "gauge"
        }
        self.lease_ttl_s: float | None = None
        self.late_renewals: list[float] = []
        """Monotonic times of lease renewals later than a third of the lease TTL."""

    # --- reading ------------------------------------------------------------------
    def value(self, name: str, **labels: str) -> float:
        """A counter's (or gauge's) current value for these labels; 0 if never set."""
        series = self._counters.get(name)
        if series is None:  # a counter with no sample yet is still a counter
            series = self._gauges.get(name)
        if series is None:
            raise KeyError(f"no counter or gauge named {name!r}")
        spec = _SPECS[name][2]
        with self._lock:
            return series.get(tuple(labels[label] for label in spec), 0.0)

    def collect(self) -> Iterator[Metric]:
        """The metric families, for a prometheus-client registry."""
        with self._lock:
            counters = {name: dict(s) for name, s in self._counters.items()}
            gauges = {name: dict(s) for name, s in self._gauges.items()}
            histograms = {
                name: (h.bounds, {k: list(v) for k, v in h.series.items()})
                for name, h in self._histograms.items()
            }
        for name, series in counters.items():
            doc, labels = _SPECS[name][1], list(_SPECS[name][2])
            family = CounterMetricFamily(name, doc, labels=labels)
            for key, count in series.items():
                family.add_metric(list(key), count)
            yield family
        for name, series in gauges.items():
            doc, labels = _SPECS[name][1], list(_SPECS[name][2])
            gauge = GaugeMetricFamily(name, doc, labels=labels)
            for key, current in series.items():
                gauge.add_metric(list(key), current)
            yield gauge
        for name, (bounds, rows) in histograms.items():
            doc, labels = _SPECS[name][1], list(_SPECS[name][2])
            histogram = HistogramMetricFamily(name, doc, labels=labels)
            for key, row in rows.items():
                cumulative, buckets = 0.0, []
                for bound, count in zip((*bounds, float("inf")), row[:-1], strict=True):
                    cumulative += count
                    buckets.append((_le(bound), cumulative))
                histogram.add_metric(list(key), buckets, row[-1])
            yield histogram

    def describe(self) -> Iterator[Metric]:
        """The families without samples (registries check names with it)."""
        for name, (kind, doc, labels) in _SPECS.items():
            family: Metric
            if kind == "counter":
                family = CounterMetricFamily(name, doc, labels=list(labels))
            elif kind == "gauge":
                family = GaugeMetricFamily(name, doc, labels=list(labels))
            else:
                family = HistogramMetricFamily(name, doc, labels=list(labels))
            yield family

    async def refresh_runs(self, store: RunListing) -> None:
        """Count the store's runs by status and queued runs by queue (one count query)."""
        counts: dict[tuple[str, ...], float] = {
            (status,): 0 for status in COUNTED_STATUSES
        }
        depth: dict[tuple[str, ...], float] = {}
        found = await store.count_runs(RunQuery(status=COUNTED_STATUSES))
        for (status, queue), n in found.items():
            counts[(status,)] += n
            if status == "queued":
                depth[(queue or "",)] = depth.get((queue or "",), 0) + n
        with self._lock:
            self._gauges["resumable_runs"] = counts
            self._gauges["resumable_queue_depth"] = depth
            self._gauges["resumable_runs_refreshed_timestamp_seconds"] = {
                (): time.time()
            }

    def late_renewals_within(self, seconds: float) -> int:
        """How many lease renewals were late (past a third of the TTL) lately."""
        since = time.monotonic() - seconds
        with self._lock:
            self.late_renewals = [t for t in self.late_renewals if t >= since]
            return len(self.late_renewals)

    # --- engine events ------------------------------------------------------------
    def _add(self, name: str, labels: tuple[str, ...], amount: float = 1.0) -> None:
        with self._lock:
            series = self._counters[name]
            series[labels] = series.get(labels, 0.0) + amount

    def _observe(self, name: str, labels: tuple[str, ...], value: float) -> None:
        with self._lock:
            self._histograms[name].observe(labels, value)

    def execution_ended(
        self, ctx: RunContext, outcome: str, error: BaseException | None
    ) -> None:
        """Count the execution, and a budget stop."""
        self._add("resumable_executions", (ctx.workflow, outcome))
        if outcome == "failed" and error is not None:
            self._add("resumable_run_failures", (ctx.workflow, type(error).__name__))
        if isinstance(error, BudgetExceeded) or isinstance(
            getattr(error, "__cause__", None), BudgetExceeded
        ):
            self._add("resumable_budget_stops", (ctx.workflow,))

    def replay_finished(self, ctx: RunContext) -> None:
        """Resume latency, for executions that replayed something."""
        if ctx.replayed:
            started_s = ctx.observed["started_s"]
            self._observe(
                "resumable_resume_seconds",
                (ctx.workflow,),
                time.perf_counter() - started_s,
            )

    def step_started(
        self, ctx: RunContext, seq: int, name: str, attempt: int, *, child: bool
    ) -> Any:
        """When the attempt started."""
        return name, time.perf_counter()

    def step_ended(
        self,
        ctx: RunContext,
        scope: Any,
        *,
        error: BaseException | None,
        retry_delay_s: float | None,
        calls: Sequence[Usage],
    ) -> None:
        """Count the attempt by outcome, its error class, its duration and LLM use."""
        name, started_s = scope
        if error is None:
            outcome = "ok"
        elif retry_delay_s is not None:
            outcome = "retrying"
        elif isinstance(error, StepFailed):
            outcome = "failed"
        else:
            outcome = "interrupted"
        labels = (ctx.workflow, name)
        duration_s = time.perf_counter() - started_s
        with self._lock:  # one acquisition for the step's updates
            executed = self._counters["resumable_steps_executed"]
            key = (*labels, outcome)
            executed[key] = executed.get(key, 0.0) + 1
            self._histograms["resumable_step_duration_seconds"].observe(
                labels, duration_s
            )
        if error is not None and outcome != "interrupted":
            cause = error.__cause__ if isinstance(error, StepFailed) else error
            kind = type(cause or error).__name__
            self._add("resumable_step_errors", (*labels, kind))
        if calls:
            self._llm(ctx, calls, "incurred")

    def step_replayed(self, ctx: RunContext, record: StepRecord) -> None:
        """Count the replay."""
        self._add("resumable_steps_replayed", (ctx.workflow, record.name))

    def usage_replayed(self, ctx: RunContext, calls: Sequence[Usage]) -> None:
        """Count the reused tokens and dollars."""
        self._llm(ctx, calls, "reused")

    def cache_looked_up(
        self, ctx: RunContext, step: str, *, hit: bool, saved: list[Usage]
    ) -> None:
        """Count the lookup, and the tokens and dollars a hit saved."""
        result = "hit" if hit else "miss"
        self._add("resumable_step_cache_lookups", (ctx.workflow, step, result))
        if saved:
            self._llm(ctx, saved, "cached")

    def _llm(self, ctx: RunContext, calls: Sequence[Usage], source: str) -> None:
        prices = ctx.runtime.prices
        for usage in calls:
            model = usage.model or "unknown"
            if not usage.is_metered:
                self._add(
                    "resumable_llm_unmetered_calls", (ctx.workflow, model, source)
                )
                continue
            inputs = (
                usage.input_tokens
                + usage.cached_input_tokens
                + usage.cache_write_tokens
            )
            self._add(
                "resumable_llm_tokens", (ctx.workflow, model, "input", source), inputs
            )
            self._add(
                "resumable_llm_tokens",
                (ctx.workflow, model, "output", source),
                usage.output_tokens,
            )
            cost = prices.cost(usage)
            if cost is None:  # its tokens are above; its dollars are unknown
                self._add("resumable_llm_unpriced_calls", (ctx.workflow, model, source))
            else:
                self._add("resumable_llm_cost_usd", (ctx.workflow, model, source), cost)

    def checkpoint_written(
        self,
        ctx: RunContext,
        record: StepRecord,
        *,
        duration_s: float,
        error: BaseException | None,
    ) -> None:
        """Write latency, bytes and outcome, by store kind."""
        store = store_kind(ctx.runtime)
        if error is not None:
            self._add("resumable_checkpoint_writes", (store, "failed"))
            return
        size = written_size(record.output) + written_size(record.usage)
        with self._lock:  # one acquisition for the commit's three updates
            writes = self._counters["resumable_checkpoint_writes"]
            writes[(store, "ok")] = writes.get((store, "ok"), 0.0) + 1
            written = self._counters["resumable_checkpoint_write_bytes"]
            written[(store,)] = written.get((store,), 0.0) + size
            self._histograms["resumable_checkpoint_write_seconds"].observe(
                (store,), duration_s
            )

    def commit_batch_written(self, store: str, size: int) -> None:
        """The size of a group of step commits written in one transaction."""
        self._observe("resumable_commit_batch_size", (store,), size)

    def store_error(self, ctx: RunContext, error: BaseException) -> None:
        """Count a retried store error by class."""
        self._add(
            "resumable_store_errors", (store_kind(ctx.runtime), type(error).__name__)
        )

    def feed_appended(
        self, ctx: RunContext, kind: str, *, entries: int, size: int
    ) -> None:
        """Count entries (and their bytes) a run appended to its feed."""
        self._add("resumable_feed_entries", (ctx.workflow, kind), entries)
        self._add("resumable_feed_bytes", (ctx.workflow, kind), size)

    def lease_renewed(self, ctx: RunContext, *, late_s: float) -> None:
        """Renewal lateness; a renewal past a third of the TTL is remembered for health."""
        self.lease_ttl_s = ctx.runtime.lease_ttl_s
        self._observe("resumable_lease_renewal_lateness_seconds", (), max(late_s, 0.0))
        if late_s > ctx.runtime.lease_ttl_s / 3:
            with self._lock:
                self.late_renewals.append(time.monotonic())

    def lease_lost(self, ctx: RunContext) -> None:
        """Count LeaseLost."""
        self._add("resumable_lease_lost", (ctx.workflow,))

    def lease_taken_over(self, run_id: str) -> None:
        """Count a takeover."""
        self._add("resumable_lease_takeovers", ())

    def run_claimed(self, run: RunRecord, *, queue_wait_s: float | None) -> None:
        """Count the claim; the queue wait of a first claim."""
        queue = run.queue or ""
        self._add("resumable_runs_claimed", (queue,))
        if queue_wait_s is not None:
            self._observe(
                "resumable_queue_wait_seconds", (queue,), max(queue_wait_s, 0.0)
            )

    def gc_collected(self, report: GcReport) -> None:
        """Rows deleted by kind (nothing for a dry run)."""
        if report.dry_run:
            return
        for kind in ("runs", "steps", "inputs", "chunks"):
            self._add("resumable_gc_deleted", (kind,), getattr(report, kind))
        self._add("resumable_gc_deleted_bytes", (), report.bytes)

    def ticks_counted(
        self, schedule: str, *, fired: int, caught_up: int, skipped: int
    ) -> None:
        """Count a schedule's ticks by outcome (each tick once, fleet-wide)."""
        for outcome, count in (
            ("fired", fired),
            ("caught_up", caught_up),
            ("skipped", skipped),
        ):
            if count:
                self._add("resumable_schedule_ticks", (schedule, outcome), count)


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))
