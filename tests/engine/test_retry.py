from __future__ import annotations

from types import SimpleNamespace

import pytest

from resumable import Engine, Retry, StepFailed, WorkflowFailed, step, workflow
from resumable._engine.retry import next_delay, retry_hint
from resumable.stores.protocol import Store
from resumable.testing import FakeClock


class Crash(BaseException):
    """Escapes the engine like the process dying."""


class HttpError(Exception):
    """Shaped like openai.RateLimitError: the response's headers carry the hint."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__("429 Too Many Requests")
        self.response = SimpleNamespace(headers=headers)


def test_backoff_grows_and_is_capped() -> None:
    policy = Retry(attempts=10, initial_delay=1, multiplier=2, max_delay=5, jitter=0)
    delays = [next_delay(policy, n, TimeoutError(), lambda: 0.5) for n in range(1, 10)]
    assert delays == [1, 2, 4, 5, 5, 5, 5, 5, 5]
    assert next_delay(policy, 10, TimeoutError(), lambda: 0.5) is None


def test_jitter_stays_within_its_fraction() -> None:
    policy = Retry(attempts=3, initial_delay=10, jitter=0.2)
    assert next_delay(policy, 1, TimeoutError(), lambda: 0.0) == pytest.approx(8)
    assert next_delay(policy, 1, TimeoutError(), lambda: 1.0) == pytest.approx(12)


def test_only_listed_exceptions_are_retried() -> None:
    policy = Retry(attempts=3, on=(TimeoutError,))
    assert next_delay(policy, 1, ValueError(), lambda: 0.5) is None


def test_server_retry_hints_are_read_from_the_response_headers() -> None:
    assert retry_hint(HttpError({"retry-after-ms": "250"})) == 0.25
    assert retry_hint(HttpError({"retry-after": "7"})) == 7
    assert retry_hint(HttpError({"retry-after": "garbage"})) is None
    assert retry_hint(HttpError({"retry-after": "-3"})) is None
    assert retry_hint(ValueError()) is None


async def test_retry_honours_the_servers_hint_up_to_max_delay(
    store: Store, clock: FakeClock
) -> None:
    failures = [HttpError({"retry-after": "30"}), HttpError({"retry-after-ms": "1500"})]

    @step(retry=Retry(attempts=3, initial_delay=1, max_delay=20))
    async def call_llm() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    @workflow
    async def wf() -> str:
        return await call_llm()

    assert await Engine(store, clock=clock).run(wf, run_id="hint") == "ok"
    assert clock.sleeps == [20, 1.5]
    (record,) = await store.load_journal("hint")
    assert (record.status, record.attempts) == ("ok", 3)


async def test_attempts_survive_a_crash_between_retries(store: Store) -> None:
    attempts_seen: list[int] = []

    class CrashOnFirstSleep(FakeClock):
        async def sleep(self, seconds: float) -> None:
            if not self.sleeps:
                self.sleeps.append(seconds)
                raise Crash
            await super().sleep(seconds)

    from resumable import current_run

    @step(retry=Retry(attempts=3, initial_delay=1, jitter=0))
    async def flaky() -> int:
        attempt = current_run().attempt
        assert attempt is not None
        attempts_seen.append(attempt)
        if attempt < 3:
            raise TimeoutError
        return attempt

    @workflow
    async def wf() -> int:
        return await flaky()

    engine = Engine(store, clock=CrashOnFirstSleep())
    with pytest.raises(Crash):
        await engine.run(wf, run_id="crashy")
    (record,) = await store.load_journal("crashy")
    assert (record.status, record.attempts) == ("retrying", 1)
    assert await engine.run(wf, run_id="crashy") == 3
    assert attempts_seen == [1, 2, 3]


async def test_exhausted_step_fails_the_run_and_running_it_again_retries(
    store: Store, clock: FakeClock
) -> None:
    healthy = [False]
    calls: list[str] = []

    @step
    async def prepare() -> str:
        calls.append("prepare")
        return "prepared"

    @step(retry=Retry(attempts=2, initial_delay=0.1))
    async def call_provider() -> str:
        calls.append("provider")
        if not healthy[0]:
            raise ConnectionError("provider down")
        return "answer"

    @workflow
    async def wf() -> str:
        return f"{await prepare()} {await call_provider()}"

    engine = Engine(store, clock=clock)
    with pytest.raises(WorkflowFailed) as caught:
        await engine.run(wf, run_id="outage")
    assert caught.value.step is not None
    assert "call_provider" in caught.value.step
    assert "run it again to retry" in str(caught.value)
    assert isinstance(caught.value.__cause__, StepFailed)
    assert calls == ["prepare", "provider", "provider"]
    assert (await engine.get("outage")).status == "failed"

    healthy[0] = True  # the cause is fixed: running the same run_id retries that step
    assert await engine.run(wf, run_id="outage") == "prepared answer"
    assert calls == ["prepare", "provider", "provider", "provider"]
    journal = [r for r in await store.load_journal("outage") if r.seq > 0]
    assert [(r.status, r.attempts) for r in journal] == [("ok", 1), ("ok", 3)]
    assert await engine.run(wf, run_id="outage") == "prepared answer"
    assert len(calls) == 4


async def test_workflow_code_failure_replays_without_executing(store: Store) -> None:
    calls: list[str] = []
    broken = [True]

    @step
    async def fetch() -> int:
        calls.append("fetch")
        return 1

    @workflow
    async def wf() -> int:
        value = await fetch()
        if broken[0]:
            raise ValueError("bug in the workflow")
        return value

    engine = Engine(store)
    with pytest.raises(WorkflowFailed, match="bug in the workflow"):
        await engine.run(wf, run_id="bug")
    broken[0] = False
    with pytest.raises(WorkflowFailed, match="bug in the workflow"):
        await engine.run(wf, run_id="bug")  # recorded failure: nothing runs
    assert calls == ["fetch"]
    assert await engine.resume("bug") == 1  # resume re-executes once the code is fixed
    assert calls == ["fetch"]


async def test_non_retryable_errors_fail_on_the_first_attempt(
    store: Store, clock: FakeClock
) -> None:
    calls: list[int] = []

    @step(retry=Retry(attempts=5, on=(TimeoutError,)))
    async def strict() -> None:
        calls.append(1)
        raise ValueError("not transient")

    @workflow
    async def wf() -> None:
        await strict()

    with pytest.raises(WorkflowFailed, match="not transient"):
        await Engine(store, clock=clock).run(wf, run_id="strict")
    assert calls == [1]
    assert clock.sleeps == []
