"""The public names are a contract: adding, removing or re-parenting one is a decision.

A change here should come with a line in the changelog of the release, and, for a
removal, a deprecation first.
"""

from __future__ import annotations

import ast
import builtins
import collections.abc
import datetime
import importlib
import inspect
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import resumable
import resumable.errors
import resumable.testing
from resumable import (
    CheckpointNotFound,
    Engine,
    NotInRun,
    RunConflict,
    UsageError,
    current_run,
    step,
    wait_for,
    workflow,
)
from resumable.cli import main

PUBLIC = {
    "Archived", "BudgetExceeded", "CachePolicy", "CapabilityMissing", "CheckReport", "Checkpoint", "CheckpointNotFound",
    "CheckpointWriteError", "Conversation", "CorruptCheckpointError", "Divergence",
    "Engine", "Event", "ExecutionSpend", "FeedEntryTooLarge", "GcReport", "InputRejected", "InputView", "JournalPage", "LeaseLost", "Ledger",
    "NonDeterminismError", "NotInRun", "Queue", "RateLimit", "RekeyReport", "ResumableError",
    "Retry", "RunCancelled", "RunCheck", "RunConflict", "RunCounts", "RunFilter",
    "RunHandle", "RunInfo", "RunNotFound", "RunPage", "RunStatus", "RunView",
    "Schedule", "ScheduleInvalid", "ScheduleNotFound", "ScheduleView", "SchemaVersionError", "SerializationError", "Spend",
    "StepExport", "StepFailed", "StepView", "StoreError", "StreamEvent", "ThreadPage", "ThreadView",
    "Usage", "UsageError",
    "WaitTimeout", "Worker", "WorkflowFailed", "WorkflowNotRegistered",
    "__version__", "current_run", "deprecate_patch", "map_steps", "now", "patched", "publish",
    "random", "uuid4",
    "register", "sleep", "step", "stream_chat", "wait_for", "workflow",
}  # fmt: skip

TESTING = {
    "T0", "CrashReport", "FakeClock", "Mutation", "StoreContract", "StoredField",
    "TamperFailure", "TamperReport", "TamperSubject", "TamperSuite", "Trial",
    "crash_test", "decompression_bomb", "mutations_of", "plain_frame",
    "record_effect", "run_record", "snapshot_record", "step_record",
}  # fmt: skip

# each error and the class it derives from: callers catch by these
ERROR_TREE = {
    "ResumableError": "Exception",
    "NonDeterminismError": "ResumableError",
    "CheckpointWriteError": "ResumableError",
    "SerializationError": "ResumableError",
    "CorruptCheckpointError": "ResumableError",
    "SchemaVersionError": "ResumableError",
    "StoreError": "ResumableError",
    "ChunksMissing": "StoreError",
    "RunNotFound": "ResumableError",
    "LeaseLost": "ResumableError",
    "WorkflowFailed": "ResumableError",
    "RunCancelled": "ResumableError",
    "StepFailed": "ResumableError",
    "WaitTimeout": "ResumableError",
    "BudgetExceeded": "ResumableError",
    "InputRejected": "ResumableError",
    "UsageError": "ResumableError",
    "NotInRun": "UsageError",
    "FeedEntryTooLarge": "UsageError",
    "RunConflict": "UsageError",
    "WorkflowNotRegistered": "UsageError",
    "CheckpointNotFound": "UsageError",
    "CapabilityMissing": "UsageError",
    "ScheduleInvalid": "UsageError",
    "ScheduleNotFound": "UsageError",
}


def test_the_package_exports_exactly_its_public_names() -> None:
    assert set(resumable.__all__) == PUBLIC
    assert len(resumable.__all__) == len(PUBLIC)  # no name twice
    for name in resumable.__all__:
        assert getattr(resumable, name) is not None


def _names_in(annotation: str) -> set[str]:
    return {
        node.id
        for node in ast.walk(ast.parse(annotation, mode="eval"))
        if isinstance(node, ast.Name)
    }


def test_every_type_a_public_engine_method_returns_is_exported() -> None:
    """A user can name what they get back: `report: resumable.RekeyReport = ...`."""
    namespace = vars(sys.modules[Engine.__module__])
    stdlib = (builtins, typing, collections.abc, datetime)
    missing = []
    for name, member in inspect.getmembers(Engine):
        if name.startswith("_"):
            continue
        function = member.fget if isinstance(member, property) else member
        if not callable(function):
            continue
        returned = inspect.get_annotations(function).get("return")
        assert isinstance(returned, str), name  # every public method says
        for used in _names_in(returned):
            found = namespace[used] if used in namespace else getattr(builtins, used)
            if isinstance(found, typing.TypeVar) or any(
                getattr(module, used, None) is found for module in stdlib
            ):
                continue
            if getattr(resumable, used, None) is not found:
                missing.append(f"Engine.{name} -> {used}")
    assert not missing, missing


def test_resumable_testing_exports_exactly_its_public_names() -> None:
    assert set(resumable.testing.__all__) == TESTING
    for name in resumable.testing.__all__:
        assert getattr(resumable.testing, name) is not None


def test_each_testing_kit_exports_the_same_objects_as_resumable_testing() -> None:
    kits = {
        "resumable.testing.clock": {"FakeClock"},
        "resumable.testing.contract": {
            "T0", "StoreContract", "run_record", "snapshot_record", "step_record",
        },
        "resumable.testing.crash": {"CrashReport", "Trial", "crash_test", "record_effect"},
        "resumable.testing.tamper": {
            "Mutation", "StoredField", "TamperFailure", "TamperReport", "TamperSubject",
            "TamperSuite", "decompression_bomb", "mutations_of", "plain_frame",
        },
        # the name the crash test had before the kits; the API reference named it
        "resumable.crashtest": {"CrashReport", "Trial", "crash_test", "record_effect"},
    }  # fmt: skip
    assert set().union(*kits.values()) == TESTING
    for module_name, names in kits.items():
        module = importlib.import_module(module_name)
        assert set(module.__all__) == names, module_name
        for name in names:
            assert getattr(module, name) is getattr(resumable.testing, name)


def test_the_error_tree_is_as_documented() -> None:
    classes = {
        name: cls
        for name, cls in inspect.getmembers(resumable.errors, inspect.isclass)
        if cls.__module__ == "resumable.errors"
    }
    assert {name: cls.__bases__[0].__name__ for name, cls in classes.items()} == (
        ERROR_TREE
    )
    doc = resumable.errors.__doc__ or ""
    for name in ERROR_TREE:  # the module docstring draws every class
        assert name in doc, name
    for name, cls in classes.items():  # every error a user can catch is exported
        if name != "ChunksMissing":  # a store's signal to the engine, retried inside
            assert getattr(resumable, name) is cls


def test_no_code_raises_the_bare_base_error() -> None:
    """Each error is a named class, so callers catch what they mean."""
    bare = []
    for path in Path(resumable.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Raise)
                and isinstance(node.exc, ast.Call)
                and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id == "ResumableError"
            ):
                bare.append(f"{path.name}:{node.lineno}")
    assert bare == []


def test_importing_the_package_imports_no_driver_or_integration() -> None:
    code = (
        "import sys, resumable; "
        "print(sorted(m for m in ('psycopg', 'redis', 'langgraph', 'openai', "
        "'anthropic', 'zstandard', 'cryptography', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


@step
async def _noop() -> int:
    return 1


@workflow(name="public_api:waits")
async def _waits_in_a_step() -> int:
    return await _noop()


async def test_calls_outside_a_run_are_not_in_run_errors() -> None:
    with pytest.raises(NotInRun) as caught:
        current_run()
    assert caught.value.call == "current_run()"
    with pytest.raises(NotInRun) as waited:
        await wait_for("approval")
    assert waited.value.call == "wait_for()"
    assert "@workflow" in str(waited.value)


async def test_conflicts_and_missing_things_are_usage_errors(engine: Engine) -> None:
    await engine.run(_waits_in_a_step, run_id="api-1")
    with pytest.raises(RunConflict) as taken:
        await engine.fork("api-1", at_step=5)
    assert taken.value.run_id == "api-1"
    with pytest.raises(CheckpointNotFound) as missing:
        await engine.load_state("no-such-thread")
    assert missing.value.thread_id == "no-such-thread"
    assert isinstance(missing.value, UsageError)


def test_the_cli_exits_2_on_a_usage_error_and_1_on_a_run_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    assert main(["gc", "--older-than", "soon", "--store", url]) == 2
    assert "--older-than 'soon'" in capsys.readouterr().err
    assert main(["gc", "--dry-run", "--store", url]) == 0  # makes the store
    capsys.readouterr()
    assert main(["show", "no-such-run", "--store", url]) == 1  # RunNotFound
    assert "does not exist" in capsys.readouterr().err


def test_resuming_a_run_whose_workflow_this_process_lacks_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    elsewhere = (
        "from resumable import Engine, workflow\n"
        "@workflow(name='elsewhere:flow')\n"
        "async def flow() -> int:\n"
        "    return 1\n"
        f"Engine({url!r}).run_sync(flow, run_id='r-elsewhere')\n"
    )
    subprocess.run([sys.executable, "-c", elsewhere], check=True)
    # --app names a module that does not define it
    assert main(["resume", "r-elsewhere", "--app", "json", "--store", url]) == 2
    err = capsys.readouterr().err
    assert "workflow 'elsewhere:flow' is not registered in this process" in err
    assert "--app MODULE" in err
