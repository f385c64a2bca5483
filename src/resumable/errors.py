"""Every error resumable raises derives from `ResumableError`.

```
ResumableError
├── NonDeterminismError     the code now calls something else at a recorded seq
├── CheckpointWriteError    the store did not take a write; the run stopped
├── SerializationError      a value cannot be encoded (names the path inside it)
├── CorruptCheckpointError  a stored payload fails its checksum or cannot be decoded
├── SchemaVersionError      the store was written by a newer resumable
├── StoreError              the store cannot be opened or read (bad URL, gone, locked)
│   └── ChunksMissing       a snapshot names chunks the store no longer holds
├── RunNotFound             no run with that id
├── LeaseLost               another worker owns the run now; this executor stops
├── WorkflowFailed          the run ended with an error (re-raised on every later run)
├── RunCancelled            the run was cancelled
├── StepFailed              a step's attempts ran out; what the workflow sees
├── WaitTimeout             wait_for() reached its timeout
├── BudgetExceeded          the run spent its budget before starting a step
├── InputRejected           send() to a finished run, or to a key already answered
└── UsageError              the library or the CLI was called in a way it cannot serve
    ├── NotInRun            current_run(), wait_for(), ... called outside the run they need
    ├── RunConflict         a run id taken by another workflow or other arguments
    ├── WorkflowNotRegistered  a stored run's workflow is not importable in this process
    ├── CheckpointNotFound  a thread has no such state or checkpoint
    ├── CapabilityMissing   the store does not implement what the call needs
    ├── ScheduleInvalid     a schedule's cron expression or time zone cannot be read
    ├── ScheduleNotFound    no schedule of that name in the store
    └── FeedEntryTooLarge   a published event or a streamed chunk is past the feed's limit
```

Errors of a run's own (`WorkflowFailed`, `StepFailed`, `BudgetExceeded`, ...) come
from the workflow and its steps; `StoreError`, `CheckpointWriteError`,
`CorruptCheckpointError` and `SchemaVersionError` from the store under it;
`UsageError` from the calling code, which the CLI reports with exit status 2.

Each message names the run, the step where there is one, and what to do next.
Facts live in keyword-only attributes so callers never parse messages.
"""

from __future__ import annotations

from resumable._plural import plural


class ResumableError(Exception):
    """Base of every error raised by resumable."""


class NonDeterminismError(ResumableError):
    """At a recorded `seq` the workflow now calls a different step or arguments."""

    def __init__(
        self, *, run_id: str, seq: int, recorded: str, called: str, reason: str
    ) -> None:
        super().__init__(
            f"run {run_id!r}, step #{seq}: recorded {recorded!r} but the code now "
            f"calls {called!r} ({reason}); restore the code that started the run, or "
            + (
                f"fork it at step {seq - 1} to continue with the new code"
                if seq > 1
                else "start a new run_id"
            )
        )
        self.run_id, self.seq, self.recorded, self.called = (
            run_id,
            seq,
            recorded,
            called,
        )
        self.reason = reason


class CheckpointWriteError(ResumableError):
    """The store refused or lost a write; the run stops rather than go on unrecorded."""

    def __init__(
        self, *, run_id: str, seq: int | None, detail: str, transient: bool = True
    ) -> None:
        where = f"run {run_id!r}" + (f", step #{seq}" if seq is not None else "")
        if transient:
            advice = "run the same run_id again once the store is back to resume"
        else:
            advice = (
                "the store refused the data itself, so writing it again cannot "
                "succeed; please report it with this message"
            )
        super().__init__(
            f"{where}: could not write to the store ({detail}); nothing after the "
            f"last committed step was recorded - {advice}"
        )
        self.run_id, self.seq, self.detail = run_id, seq, detail
        self.transient = transient
        """False when the store refused the record itself (not retried)."""


class SerializationError(ResumableError):
    """A value cannot be encoded, or decoded to a type that is not registered."""

    def __init__(
        self,
        *,
        run_id: str | None = None,
        step: str | None = None,
        path: str,
        detail: str,
    ) -> None:
        where = ", ".join(
            part
            for part in (
                f"run {run_id!r}" if run_id is not None else "",
                f"step {step!r}" if step is not None else "",
            )
            if part
        )
        prefix = f"{where}: " if where else ""
        super().__init__(
            f"{prefix}{path}: {detail}; return JSON-like data, dataclasses, enums or "
            f"pydantic models, and register custom types with resumable.register()"
        )
        self.run_id, self.step, self.path, self.detail = run_id, step, path, detail


class CorruptCheckpointError(ResumableError):
    """A stored payload failed its checksum, its decryption or its decoding."""

    def __init__(self, *, place: str, detail: str) -> None:
        super().__init__(
            f"{place}: stored data is corrupt ({detail}); it was not used. Fork the "
            f"run before this step, or delete the run to start it over"
        )
        self.place, self.detail = place, detail


class SchemaVersionError(ResumableError):
    """The store's schema is newer than this version of resumable understands."""

    def __init__(self, *, store: str, found: int, supported: int) -> None:
        super().__init__(
            f"{store}: schema version {found} was written by a newer resumable "
            f"(this one supports up to {supported}); upgrade resumable to use this store"
        )
        self.store, self.found, self.supported = store, found, supported


class StoreError(ResumableError):
    """The store cannot be opened or read: a bad URL, a missing driver, or it went away."""

    def __init__(self, *, store: str, detail: str) -> None:
        super().__init__(f"store {store}: {detail}")
        self.store, self.detail = store, detail


class ChunksMissing(StoreError):
    """`save_snapshot` or `swap_snapshots` refused a snapshot naming chunks not held.

    Raised when a collection deleted chunks a writer still counted as stored;
    nothing was saved. The engine then writes the snapshot again with every chunk.
    """

    def __init__(self, *, store: str, thread_id: str, hashes: tuple[str, ...]) -> None:
        super().__init__(
            store=store,
            detail=f"thread {thread_id!r}: a snapshot names {len(hashes)} chunk(s) "
            f"the store does not hold (e.g. {hashes[0]}), so it was not saved; save "
            f"it again with those chunks",
        )
        self.thread_id, self.hashes = thread_id, hashes


class RunNotFound(ResumableError):
    """No run has that id."""

    def __init__(self, *, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} does not exist in this store; "
            f"list runs with `resumable runs` or check --store"
        )
        self.run_id = run_id


class LeaseLost(ResumableError):
    """Another executor holds the run now; this one must stop writing."""

    def __init__(self, *, run_id: str, seq: int | None = None, fence: int) -> None:
        step = f", step #{seq}" if seq is not None else ""
        super().__init__(
            f"run {run_id!r}{step}: this executor's lease (fence {fence}) was taken "
            f"over by another worker or the run was cancelled; nothing was written - "
            f"the new owner continues the run"
        )
        self.run_id, self.seq, self.fence = run_id, seq, fence


class WorkflowFailed(ResumableError):
    """The run ended with an error; running it again re-raises it without executing."""

    def __init__(
        self, *, run_id: str, error_type: str, message: str, step: str | None = None
    ) -> None:
        where = f" in step {step!r}" if step else ""
        super().__init__(
            f"run {run_id!r} failed{where}: {error_type}: {message}; "
            f"see `resumable show {run_id}`"
            + (
                ", fix the cause and run it again to retry that step"
                if step
                else ", or fork it to continue with fixed code"
            )
        )
        self.run_id, self.error_type, self.message, self.step = (
            run_id,
            error_type,
            message,
            step,
        )


class RunCancelled(ResumableError):
    """The run was cancelled; running it again raises this without executing."""

    def __init__(self, *, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} was cancelled; start a new run_id (or fork it) to run again"
        )
        self.run_id = run_id


class StepFailed(ResumableError):
    """A step raised and its retries ran out.

    The workflow sees this (both when the step ran and when its failure is replayed),
    so a workflow that catches it takes the same path on every execution.
    """

    def __init__(
        self,
        *,
        run_id: str,
        seq: int,
        step: str,
        error_type: str,
        message: str,
        attempts: int,
    ) -> None:
        super().__init__(
            f"run {run_id!r}, step #{seq} {step!r} failed after "
            f"{plural(attempts, 'attempt')}: {error_type}: {message}"
        )
        self.run_id, self.seq, self.step = run_id, seq, step
        self.error_type, self.message, self.attempts = error_type, message, attempts


class WaitTimeout(ResumableError):
    """`wait_for(key, timeout=...)` reached its deadline with no input."""

    def __init__(self, *, run_id: str, seq: int, key: str, timeout_s: float) -> None:
        super().__init__(
            f"run {run_id!r}, step #{seq}: no input for {key!r} within {timeout_s:g}s"
        )
        self.run_id, self.seq, self.key, self.timeout_s = run_id, seq, key, timeout_s


class BudgetExceeded(ResumableError):
    """The run's incurred spend passed its budget; no further step was started."""

    def __init__(self, *, run_id: str, step: str, spent: str, budget: str) -> None:
        super().__init__(
            f"run {run_id!r}: spent {spent} of a {budget} budget, so step {step!r} was "
            f"not started; raise the budget and run it again to continue"
        )
        self.run_id, self.step, self.spent, self.budget = run_id, step, spent, budget


class InputRejected(ResumableError):
    """`send()` to a run that cannot take that input."""

    def __init__(self, *, run_id: str, key: str, reason: str) -> None:
        super().__init__(f"run {run_id!r}, input {key!r}: {reason}")
        self.run_id, self.key, self.reason = run_id, key, reason


class UsageError(ResumableError):
    """The library (or the CLI) was called in a way it cannot serve; fix the call."""


class NotInRun(UsageError):
    """A call that needs a running workflow or step was made outside one."""

    def __init__(self, *, call: str, where: str) -> None:
        super().__init__(f"{call} must be called {where}")
        self.call, self.where = call, where


class RunConflict(UsageError):
    """A run id is taken by another workflow or other arguments, or a fork point is out of range."""

    def __init__(self, *, run_id: str, reason: str) -> None:
        super().__init__(f"run {run_id!r} {reason}")
        self.run_id, self.reason = run_id, reason


class WorkflowNotRegistered(UsageError):
    """A stored run names a workflow this process has not imported."""

    def __init__(self, *, run_id: str, workflow: str, hint: str) -> None:
        super().__init__(
            f"run {run_id!r}: workflow {workflow!r} is not registered in {hint}"
        )
        self.run_id, self.workflow = run_id, workflow


class CheckpointNotFound(UsageError):
    """A thread has no state, or not the checkpoint asked for."""

    def __init__(self, *, thread_id: str, detail: str) -> None:
        super().__init__(f"thread {thread_id!r} {detail}")
        self.thread_id, self.detail = thread_id, detail


class CapabilityMissing(UsageError):
    """The store does not implement a part of the Store protocol the call needs."""

    def __init__(self, *, store: str, capability: str, call: str) -> None:
        super().__init__(
            f"{call} needs a store that implements {capability}, and {store} does "
            f"not; use a store that does (memory://, sqlite://, postgresql://, "
            f"redis://) or add {capability}'s methods to yours (docs/stores.md)"
        )
        self.store, self.capability, self.call = store, capability, call


class ScheduleInvalid(UsageError):
    """A schedule's cron expression or time zone cannot be read; fix the declaration."""

    def __init__(self, *, schedule: str, workflow: str, detail: str) -> None:
        super().__init__(
            f"schedule {schedule!r} of workflow {workflow!r}: {detail}; write five "
            f"cron fields (minute hour day month weekday), or six with seconds last, "
            f"and an IANA time zone such as 'Europe/Paris'"
        )
        self.schedule, self.workflow, self.detail = schedule, workflow, detail


class ScheduleNotFound(UsageError):
    """No schedule of that name is in the store."""

    def __init__(self, *, schedule: str) -> None:
        super().__init__(
            f"no schedule {schedule!r} in the store; `resumable schedules list` "
            f"shows those a worker has run"
        )
        self.schedule = schedule


class FeedEntryTooLarge(UsageError):
    """A published event or a streamed chunk is larger than a feed entry may be."""

    def __init__(
        self, *, run_id: str, what: str, size: int, limit: int, seq: int | None = None
    ) -> None:
        where = f"run {run_id!r}" + (f", step #{seq}" if seq is not None else "")
        super().__init__(
            f"{where}: {what} is {size} bytes encoded, past the feed's limit of "
            f"{limit}; publish a smaller value (a summary, or a reference to where "
            f"the data is) or yield the text in smaller pieces"
        )
        self.run_id, self.what, self.size, self.limit, self.seq = (
            run_id,
            what,
            size,
            limit,
            seq,
        )
