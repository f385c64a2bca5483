"""Claiming runs, decided once: which runs are claimable, how many to read, which to admit.

Every store applies these decisions inside its own transaction (or, for Redis, passes
the numbers they compute into its claim script, which must stay one atomic script):

- `is_claimable`: whether a worker should take a run now (the SQL stores say the same
  in their WHERE clauses; `StoreContract` checks that every store agrees).
- `candidate_window`: how many runnable runs a claim reads in one go.
- `Admission`: queue admission. Given each queue's load (runs holding a live lease,
  starts within the rate window) and the candidates in claim order, it decides which
  to admit and counts each admitted run against its queue for the rest of the claim.

The store keeps only what must be atomic: reading the candidates and each queue's load,
and the fenced lease write.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from resumable.stores import _rules
from resumable.stores.protocol import QueuePolicy, RunRecord

WINDOW_FACTOR = 4
"""A claim for `limit` runs reads this many times `limit` candidates (plus the slack).

A candidate read is not a run claimed: its queue may be full or out of starts, or
another worker may lease it first. Reading a few times more than wanted lets one claim
still fill up past those, while a worker never reads the whole ready set."""
WINDOW_SLACK = 16
"""Read at least this many candidates, so a claim for one run looks past a few refusals."""
UNFILTERED_VERSIONS_FACTOR = 4
"""How much further a store looks when it cannot filter versions while reading.

Redis reads a workflow's ready runs without knowing their versions, so a worker limited
to some versions skips the others' runs after reading them and must read further."""


def candidate_window(limit: int, *, skips_versions_after_reading: bool = False) -> int:
    """How many runnable runs a claim for `limit` runs reads (per workflow for Redis).

    Args:
        limit: the most runs the claim leases.
        skips_versions_after_reading: the store reads candidates of every version and
            drops the ones the worker does not run afterwards.
    """
    window = limit * WINDOW_FACTOR + WINDOW_SLACK
    if skips_versions_after_reading:
        window *= UNFILTERED_VERSIONS_FACTOR
    return window


def is_claimable(
    run: RunRecord, *, now_ms: int, versions: Collection[str] | None
) -> bool:
    """Whether a worker running `versions` (None: any) should claim `run` now."""
    return _rules.is_runnable(run, now_ms) and _rules.version_claimable(run, versions)


def rate_window_start_ms(policy: QueuePolicy, now_ms: int) -> int | None:
    """Starts at or before this time no longer count against the queue's rate (None: no rate)."""
    return None if policy.rate is None else now_ms - policy.period_ms


@dataclass(frozen=True, slots=True)
class QueueLoad:
    """A queue's load as the store reads it inside the claim's transaction."""

    active: int
    """Runs of the queue holding a live lease."""
    started: int
    """Runs of the queue started after `rate_window_start_ms`."""


def refusal(policy: QueuePolicy, load: QueueLoad, *, is_start: bool) -> str | None:
    """Why `policy` refuses one more run at `load` ('full' or 'rate'), or None to admit.

    `is_start`: the run is queued, so leasing it starts it and counts against the rate;
    a run resumed after a sleep, a wait or an expired lease does not.
    """
    if policy.concurrency is not None and load.active >= policy.concurrency:
        return "full"
    if is_start and policy.rate is not None and load.started >= policy.rate:
        return "rate"
    return None


@dataclass(slots=True)
class Admission:
    """Queue admission over one claim, in claim order.

    The store feeds each queue's load (`needs_load`, `set_load`) before asking about
    that queue's runs, then asks `admit` for every candidate in claim order.
    """

    policies: Mapping[str, QueuePolicy]
    load: dict[str, QueueLoad] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)
    """Queues that admit nothing more in this claim (full, or their load unknown)."""
    unstartable: set[str] = field(default_factory=set)
    """Queues that admit no more starts (rate) in this claim."""
    starts: list[str] = field(default_factory=list)
    """The queue of every start admitted under a rate, to record in the store."""

    def needs_load(self, queues: Iterable[str | None]) -> list[str]:
        """The queues among `queues` with a policy and no load known yet, sorted."""
        return sorted(
            {
                q
                for q in queues
                if q is not None
                and q in self.policies
                and q not in self.load
                and q not in self.closed
            }
        )

    def set_load(self, queue: str, load: QueueLoad) -> None:
        """Record `queue`'s load as read in the claim's transaction."""
        self.load[queue] = load

    def close(self, queue: str) -> None:
        """Admit nothing more from `queue` in this claim (e.g. its lock is busy)."""
        self.closed.add(queue)

    def admit(self, queue: str | None, *, is_start: bool) -> bool:
        """Whether a run of `queue` may be claimed now; if so, count it against the queue."""
        policy = None if queue is None else self.policies.get(queue)
        if queue is None or policy is None:
            return True
        if queue in self.closed:
            return False
        load = self.load[queue]
        reason = refusal(policy, load, is_start=is_start)
        if reason == "full":
            self.closed.add(queue)
            return False
        if reason == "rate":
            self.unstartable.add(queue)
            return False
        if is_start and policy.rate is not None:
            self.starts.append(queue)
        self.load[queue] = QueueLoad(load.active + 1, load.started + int(is_start))
        return True
