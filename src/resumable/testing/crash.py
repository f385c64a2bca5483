"""Crash-test your own workflow: SIGKILL it at every step boundary, resume, check.

`crash_test(workflow, *args)` runs the workflow once in a child process to learn
how many step commits it makes (N) and its result. Then, for every k in 1..N, it
starts the run again in a new child that kills itself with SIGKILL at commit k,
either just before the store takes it (the step ran, its result is lost: it runs
again) or just after (the step is durable: it must never run again). A third
child resumes the run, and the helper checks:

- the resumed run succeeds with the reference result (or `expected`);
- every side effect recorded with `record_effect` ran exactly as often as in the
  uninterrupted run, except those of steps that had started but not committed at
  the kill, which may run once more (with `exactly_once=True`, not even those:
  for effects made idempotent with `current_run().idempotency_key`).

The children import the workflow by its module and name, so it must be defined at
the top level of an importable module (a test module is fine), and its arguments
must be JSON values. Any store that several processes can open works; the default
is a SQLite file in a temporary directory. POSIX only (SIGKILL).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from resumable._engine.context import current_run
from resumable._engine.engine import Engine
from resumable.errors import ResumableError
from resumable.stores import create_store
from resumable.stores.kinds import JournalKind
from resumable.stores.protocol import StepRecord, Store

__all__ = ["CrashReport", "Trial", "crash_test", "record_effect"]

Phase = Literal["before-commit", "after-commit"]
Effect = tuple[int, str]
"""(the step's seq, or 0 outside a step; the effect's name)"""
T = TypeVar("T")

_EFFECTS_ENV = "RESUMABLE_CRASH_EFFECTS"
_UNSET: Any = object()


def record_effect(name: str) -> None:
    """Count one side effect for `crash_test` (does nothing outside a crash test).

    Call it where the effect happens (after the email is sent, the row inserted),
    inside a step.
    """
    path = os.environ.get(_EFFECTS_ENV)
    if not path:
        return
    try:
        info = current_run()
    except ResumableError:
        run_id, seq = "", 0
    else:
        run_id, seq = info.run_id, info.seq or 0
    line = json.dumps([run_id, seq, name]) + "\n"
    # one write of one short line with O_APPEND: a SIGKILL cannot tear it
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trial:
    """One kill and resume."""

    kill_at: int
    """The step commit (1-based, in commit order) at which the child died."""
    phase: Phase
    committed_before: frozenset[int]
    """Seqs of the steps the store held when the child died."""
    effects: collections.Counter[Effect]
    """Every recorded effect, over both processes."""
    reran: frozenset[Effect]
    """Effects that ran more often than in the uninterrupted run."""
    result: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashReport:
    """What `crash_test` did: the uninterrupted run, then every trial."""

    boundaries: int
    """Step commits the uninterrupted run made."""
    result: Any
    effects: collections.Counter[Effect]
    """The uninterrupted run's effects."""
    trials: list[Trial] = field(default_factory=list)


def crash_test(
    workflow: Callable[..., Any],
    *args: Any,
    store: str | None = None,
    expected: Any = _UNSET,
    phases: Sequence[Phase] = ("before-commit", "after-commit"),
    exactly_once: bool = False,
    timeout: float = 60.0,
    **kwargs: Any,
) -> CrashReport:
    """Kill `workflow(*args, **kwargs)` at every step commit in turn and check each resume.

    Args:
        workflow: A `@workflow` defined at the top level of an importable module.
        *args: Its arguments (JSON values).
        **kwargs: Its keyword arguments (JSON values).
        store: A store URL other processes can open (default: a temporary SQLite
            file). Each trial uses its own run ids, so a shared store is fine.
        expected: The result every resumed run must return (default: the result
            of the uninterrupted run).
        phases: Where at each commit to kill: before the store takes it, after.
        exactly_once: Every recorded effect must run exactly as often as in the
            uninterrupted run, even for steps interrupted in flight.
        timeout: Seconds each child process may take.

    Raises:
        AssertionError: a resumed run failed, returned another result, or ran an
            effect more often than allowed; or the workflow made a different
            number of commits from one run to the next.
    """
    if store is not None and store.startswith("memory:"):
        raise ValueError(
            "crash_test runs the workflow in other processes: give a store they can "
            "open (sqlite:///file.db, postgresql://..., redis://...), not memory://"
        )
    target = _import_path(workflow)
    payload = _arguments(args, kwargs)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = store or f"sqlite:///{tmp / 'crash.db'}"
        child = _Child(url, target, payload, tmp, timeout)
        prefix = f"crash-{uuid.uuid4().hex[:8]}"
        reference_id = f"{prefix}-reference"
        commits = child.run(reference_id, kill_at=0, phase="after-commit")
        if commits == 0:
            raise AssertionError(
                f"{target[1]} committed no step: there is no boundary to crash at"
            )
        reference_effects = child.effects(reference_id)
        result = _read(
            url, lambda engine: _result(engine, workflow, args, kwargs, reference_id)
        )
        report = CrashReport(
            boundaries=commits, result=result, effects=reference_effects
        )
        want = result if expected is _UNSET else expected
        for kill_at in range(1, commits + 1):
            for phase in phases:
                run_id = f"{prefix}-{kill_at}-{phase}"
                trial = child.trial(
                    run_id,
                    kill_at=kill_at,
                    phase=phase,
                    workflow=workflow,
                    args=args,
                    kwargs=kwargs,
                )
                _check(trial, report, want, exactly_once=exactly_once)
                report.trials.append(trial)
    return report


def _import_path(workflow: Callable[..., Any]) -> tuple[str, str]:
    module, name = workflow.__module__, workflow.__qualname__
    if module == "__main__" or "<locals>" in name:
        raise ValueError(
            f"crash_test imports {name} in child processes: define it at the top "
            "level of an importable module"
        )
    return module, name


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    try:
        return json.dumps([list(args), kwargs])
    except TypeError as exc:
        raise ValueError(
            f"crash_test passes the arguments to child processes as JSON: {exc}"
        ) from exc


def _read(url: str, fn: Callable[[Engine], Awaitable[T]]) -> T:
    """Run `fn` on an engine in a thread of its own (the caller may hold a loop)."""

    async def go() -> T:
        async with Engine(url) as engine:
            return await fn(engine)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


async def _result(
    engine: Engine,
    workflow: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str,
) -> Any:
    status = (await engine.get(run_id)).status
    if status != "succeeded":
        raise AssertionError(f"run {run_id!r} ended {status}, not succeeded")
    # a finished run returns its recorded result without executing anything
    return await engine.run(workflow, *args, run_id=run_id, **kwargs)


async def _committed(engine: Engine, run_id: str) -> frozenset[int]:
    with contextlib.suppress(ResumableError):
        return frozenset(
            s.seq for s in await engine.history(run_id) if s.status == "ok"
        )
    return frozenset()


@dataclass(slots=True)
class _Child:
    url: str
    target: tuple[str, str]
    arguments: str
    tmp: Path
    timeout: float

    def run(self, run_id: str, *, kill_at: int, phase: Phase) -> int:
        """Run (or resume) `run_id` in a child; the commits it made, or -1 if killed."""
        env = dict(os.environ)
        env[_EFFECTS_ENV] = str(self.tmp / f"{run_id}.effects")
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        command = [
            sys.executable,
            "-m",
            "resumable.testing.crash",
            self.url,
            *self.target,
            run_id,
            self.arguments,
            str(kill_at),
            phase,
        ]
        done = subprocess.run(  # noqa: S603 - our own interpreter and module
            command,
            env=env,
            capture_output=True,
            timeout=self.timeout,
            check=False,
        )
        if done.returncode == -signal.SIGKILL and kill_at:
            return -1
        if done.returncode != 0:
            raise AssertionError(
                f"run {run_id!r} exited with status {done.returncode}"
                + (f", before commit {kill_at} was reached" if kill_at else "")
                + f":\n{done.stderr.decode(errors='replace')[-3000:]}"
            )
        if kill_at:
            raise AssertionError(
                f"run {run_id!r} finished without reaching step commit {kill_at}: "
                "the workflow makes a different number of commits from run to run"
            )
        return int(done.stdout.decode().split()[-1])

    def effects(self, run_id: str) -> collections.Counter[Effect]:
        path = self.tmp / f"{run_id}.effects"
        counts: collections.Counter[Effect] = collections.Counter()
        if path.exists():
            for line in path.read_text().splitlines():
                _, seq, name = json.loads(line)
                counts[(int(seq), str(name))] += 1
        return counts

    def trial(
        self,
        run_id: str,
        *,
        kill_at: int,
        phase: Phase,
        workflow: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Trial:
        self.run(run_id, kill_at=kill_at, phase=phase)
        committed = _read(self.url, lambda engine: _committed(engine, run_id))
        before = self.effects(run_id)
        self.run(run_id, kill_at=0, phase=phase)
        result = _read(
            self.url, lambda engine: _result(engine, workflow, args, kwargs, run_id)
        )
        effects = self.effects(run_id)
        return Trial(
            kill_at=kill_at,
            phase=phase,
            committed_before=committed,
            effects=effects,
            reran=frozenset(
                key for key in effects if effects[key] > before[key] and before[key]
            ),
            result=result,
        )


def _check(trial: Trial, report: CrashReport, want: Any, *, exactly_once: bool) -> None:
    where = f"killed {trial.phase.replace('-', ' ')} #{trial.kill_at}"
    if trial.result != want:
        raise AssertionError(
            f"{where}: the resumed run returned {trial.result!r}, expected {want!r}"
        )
    for key in report.effects.keys() | trial.effects.keys():
        seq, name = key
        ran, reference = trial.effects[key], report.effects[key]
        in_step = seq != 0  # an effect's seq is 0 in the workflow body
        in_flight = in_step and seq not in trial.committed_before and not exactly_once
        allowed = (
            range(reference, 2 * reference + 1)
            if in_flight
            else range(reference, reference + 1)
        )
        if ran not in allowed:
            place = f"step #{seq}" if seq else "the workflow body (not a step)"
            raise AssertionError(
                f"{where}: effect {name!r} of {place} ran {ran} times, "
                f"{reference} in the uninterrupted run"
                + (
                    ""
                    if in_flight
                    else "; it had committed before the kill, or is not in a step"
                )
            )


class _KillingStore:
    """Delegates to a store, and SIGKILLs this process at one step commit."""

    def __init__(self, inner: Store, kill_at: int, phase: Phase) -> None:
        self._inner = inner
        self._kill_at = kill_at
        self._phase = phase
        self.commits = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit_step(self, step: StepRecord, *, fence: int) -> None:
        if step.kind is JournalKind.LEDGER:
            await self._inner.commit_step(step, fence=fence)
            return
        self.commits += 1
        killing = self.commits == self._kill_at
        if killing and self._phase == "before-commit":
            os.kill(os.getpid(), signal.SIGKILL)
        await self._inner.commit_step(step, fence=fence)
        if killing:
            os.kill(os.getpid(), signal.SIGKILL)


def _resolve(module: str, qualname: str) -> Any:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


async def _child(argv: Sequence[str]) -> int:
    url, module, qualname, run_id, arguments, kill_at, phase_name = argv
    workflow = _resolve(module, qualname)
    args, kwargs = json.loads(arguments)
    phase: Phase = "before-commit" if phase_name == "before-commit" else "after-commit"
    killing = _KillingStore(create_store(url), int(kill_at), phase)
    # a delegating proxy: every method but commit_step is the real store's
    async with Engine(cast("Store", killing)) as engine:
        await engine.run(workflow, *args, run_id=run_id, **kwargs)
    return killing.commits


def _main(argv: Sequence[str]) -> None:
    print(asyncio.run(_child(argv)))  # noqa: T201 - the parent reads the commit count


if __name__ == "__main__":
    _main(sys.argv[1:])
