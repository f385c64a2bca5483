"""resumable: durable, resumable LLM workflows.

Every step's result is committed to a store before the workflow moves on, so a run
that dies at step 8 resumes there and replays steps 1-7 from the store for free.
"""

from __future__ import annotations

from resumable._engine.batch import RateLimit, map_steps
from resumable._engine.cache_policy import CachePolicy
from resumable._engine.check import CheckReport, RunCheck
from resumable._engine.context import RunInfo, current_run
from resumable._engine.conversation import Conversation
from resumable._engine.decorators import step, workflow
from resumable._engine.engine import Engine, RunHandle
from resumable._engine.events import Event, publish
from resumable._engine.export import InputView, JournalPage, StepExport
from resumable._engine.history import StepView
from resumable._engine.ledger import ExecutionSpend, Ledger, Spend
from resumable._engine.listing import (
    RunCounts,
    RunFilter,
    RunPage,
    RunView,
    ThreadPage,
    ThreadView,
)
from resumable._engine.patches import deprecate_patch, patched
from resumable._engine.probe import Divergence
from resumable._engine.recorded import now, random, uuid4
from resumable._engine.rekey import RekeyReport
from resumable._engine.retention import GcReport
from resumable._engine.retry import Retry
from resumable._engine.schedules import Schedule, ScheduleView
from resumable._engine.snapshots import Checkpoint
from resumable._engine.specs import register
from resumable._engine.streams import StreamEvent
from resumable._engine.waits import sleep, wait_for
from resumable._engine.worker import Queue, Worker
from resumable.errors import (
    BudgetExceeded,
    CapabilityMissing,
    CheckpointNotFound,
    CheckpointWriteError,
    CorruptCheckpointError,
    FeedEntryTooLarge,
    InputRejected,
    LeaseLost,
    NonDeterminismError,
    NotInRun,
    ResumableError,
    RunCancelled,
    RunConflict,
    RunNotFound,
    ScheduleInvalid,
    ScheduleNotFound,
    SchemaVersionError,
    SerializationError,
    StepFailed,
    StoreError,
    UsageError,
    WaitTimeout,
    WorkflowFailed,
    WorkflowNotRegistered,
)
from resumable.integrations.openai_streams import stream_chat
from resumable.stores.archive import Archived
from resumable.stores.protocol import RunStatus
from resumable.usage import Usage

__version__ = "0.1.0"

__all__ = [
    "Archived",
    "BudgetExceeded",
    "CachePolicy",
    "CapabilityMissing",
    "CheckReport",
    "Checkpoint",
    "CheckpointNotFound",
    "CheckpointWriteError",
    "Conversation",
    "CorruptCheckpointError",
    "Divergence",
    "Engine",
    "Event",
    "ExecutionSpend",
    "FeedEntryTooLarge",
    "GcReport",
    "InputRejected",
    "InputView",
    "JournalPage",
    "LeaseLost",
    "Ledger",
    "NonDeterminismError",
    "NotInRun",
    "Queue",
    "RateLimit",
    "RekeyReport",
    "ResumableError",
    "Retry",
    "RunCancelled",
    "RunCheck",
    "RunConflict",
    "RunCounts",
    "RunFilter",
    "RunHandle",
    "RunInfo",
    "RunNotFound",
    "RunPage",
    "RunStatus",
    "RunView",
    "Schedule",
    "ScheduleInvalid",
    "ScheduleNotFound",
    "ScheduleView",
    "SchemaVersionError",
    "SerializationError",
    "Spend",
    "StepExport",
    "StepFailed",
    "StepView",
    "StoreError",
    "StreamEvent",
    "ThreadPage",
    "ThreadView",
    "Usage",
    "UsageError",
    "WaitTimeout",
    "Worker",
    "WorkflowFailed",
    "WorkflowNotRegistered",
    "__version__",
    "current_run",
    "deprecate_patch",
    "map_steps",
    "now",
    "patched",
    "publish",
    "random",
    "register",
    "sleep",
    "step",
    "stream_chat",
    "uuid4",
    "wait_for",
    "workflow",
]
