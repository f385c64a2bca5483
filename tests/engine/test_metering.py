"""SDK metering: a step's calls are counted where they happen, whatever it returns."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletion

from resumable import BudgetExceeded, Engine, step, workflow
from resumable._engine.ledger import encode_entries
from resumable.cli import main
from resumable.observability import Metrics
from resumable.pricing import Price, PriceTable
from resumable.serde import Serde, TypeRegistry
from resumable.simulator import SimulatedProvider
from resumable.ui import run_page
from resumable.usage import Usage

PRICES = PriceTable({"sim-model": Price(input_per_mtok=1.0, output_per_mtok=4.0)})


@pytest.fixture
def provider() -> Iterator[SimulatedProvider]:
    with SimulatedProvider() as provider:
        yield provider


def answered_tokens(provider: SimulatedProvider) -> tuple[int, int, int]:
    """Calls, input and output tokens the provider answered, from its own log."""
    answered = [e for e in provider.requests() if e.status == 200 and e.usage]
    return (
        len(answered),
        sum(e.usage.input_tokens for e in answered if e.usage),
        sum(e.usage.output_tokens for e in answered if e.usage),
    )


async def test_a_budget_stops_text_returning_steps_at_the_step_that_crosses_it(
    provider: SimulatedProvider, tmp_path: Path
) -> None:
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )

    @step
    async def answer(question: str) -> str:
        r = await client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": question}]
        )
        return str(r.choices[0].message.content)

    @workflow(name="tests.metering.budget", budget_usd=0.001)
    async def quiz(n: int) -> list[str]:
        return [await answer(f"question {i} about tea") for i in range(n)]

    async with Engine(f"sqlite:///{tmp_path / 'b.db'}", prices=PRICES) as engine:
        with pytest.raises(BudgetExceeded) as caught:
            await engine.run(quiz, 20, run_id="capped")
        ledger = await engine.ledger("capped")
    calls, inputs, outputs = answered_tokens(provider)
    assert 1 < calls < 20  # stopped, and not before spending
    # the step that crossed the budget was the last one to run
    spent = (inputs * 1.0 + outputs * 4.0) / 1e6
    before_last = (
        spent
        - (
            provider.requests()[-1].usage.input_tokens * 1.0  # type: ignore[union-attr]
            + provider.requests()[-1].usage.output_tokens * 4.0  # type: ignore[union-attr]
        )
        / 1e6
    )
    assert before_last <= 0.001 < spent
    assert ledger.incurred.calls == calls
    assert ledger.incurred.cost_usd == pytest.approx(spent)
    assert ".answer' was not started" in str(caught.value)
    await client.close()


async def test_a_returned_completion_that_the_meter_saw_is_counted_once(
    provider: SimulatedProvider,
) -> None:
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )

    @step
    async def whole(question: str) -> ChatCompletion:
        return await client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": question}]
        )

    @workflow(name="tests.metering.once")
    async def ask() -> str:
        return str((await whole("tea or coffee")).choices[0].message.content)

    async with Engine("memory://", prices=PRICES) as engine:
        await engine.run(ask, run_id="once")
        ledger = await engine.ledger("once")
    calls, inputs, outputs = answered_tokens(provider)
    assert (ledger.incurred.calls, ledger.incurred.input_tokens) == (calls, inputs)
    assert calls == 1
    assert ledger.incurred.output_tokens == outputs
    await client.close()


async def test_metering_off_records_only_what_a_step_returns(
    provider: SimulatedProvider,
) -> None:
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )

    @step
    async def text(question: str) -> str:
        r = await client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": question}]
        )
        return str(r.choices[0].message.content)

    @workflow(name="tests.metering.off")
    async def ask() -> str:
        return await text("tea or coffee")

    async with Engine("memory://", metering=False) as engine:
        await engine.run(ask, run_id="off")
        assert (await engine.ledger("off")).incurred.calls == 0
    # outside any step the SDK works as ever, and nothing is recorded anywhere
    r = await client.chat.completions.create(
        model="sim-model", messages=[{"role": "user", "content": "outside"}]
    )
    await client.close()
    assert r.usage is not None


async def test_calls_whose_usage_cannot_be_known_are_unmetered_in_every_view(
    provider: SimulatedProvider,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )
    sync_anthropic = anthropic.Anthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    )

    @step
    async def no_usage_asked(question: str) -> str:
        # a stream without stream_options.include_usage carries no usage
        stream = await openai_client.chat.completions.create(
            model="sim-model",
            messages=[{"role": "user", "content": question}],
            stream=True,
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream])

    @step
    async def cut_short(question: str) -> str:
        def first_words() -> str:
            with sync_anthropic.messages.stream(
                model="claude-haiku-4-5",
                max_tokens=100,
                messages=[{"role": "user", "content": question}],
            ) as stream:
                for text in stream.text_stream:
                    return text  # the rest of the stream is never read
            return ""

        return await asyncio.to_thread(first_words)

    @workflow(name="tests.metering.unmetered")
    async def ask() -> str:
        return await no_usage_asked("tea") + await cut_short("coffee")

    url = f"sqlite:///{tmp_path / 'u.db'}"
    metrics = Metrics()
    async with Engine(url, observers=[metrics]) as engine:
        await engine.run(ask, run_id="unmetered")
        ledger = await engine.ledger("unmetered")
        page = await run_page.render_live(engine, "unmetered")
    assert "2 unmetered calls" in page
    assert page.count("(1 unmetered)") == 2  # each step's row
    wf = "tests.metering.unmetered"
    for model in ("sim-model", "claude-haiku-4-5"):
        labels = {"workflow": wf, "model": model, "source": "incurred"}
        assert metrics.value("resumable_llm_unmetered_calls", **labels) == 1
        assert metrics.value("resumable_llm_tokens", direction="input", **labels) == 0
    assert ledger.incurred.calls == 2
    assert ledger.incurred.unmetered_calls == 2
    assert ledger.incurred.total_tokens == 0
    for argv in (["runs"], ["show", "unmetered"]):
        assert await asyncio.to_thread(main, [*argv, "--store", url]) == 0
        out = capsys.readouterr().out
        assert "2 unmetered" in out
        assert "$0.0000" not in out
    await openai_client.close()
    sync_anthropic.close()


def test_an_unmetered_call_round_trips_and_old_records_read_as_metered() -> None:
    unmetered = Usage(model="m", provider="openai", is_metered=False, response_id="x")
    assert Usage.from_dict(unmetered.to_dict()) == unmetered
    old = {"model": "m", "provider": "openai", "input_tokens": 3, "output_tokens": 1}
    assert Usage.from_dict(old).is_metered
    assert "is_metered" not in Usage(model="m", provider=None).to_dict()


async def test_sync_steps_meter_raw_responses_and_streams_of_both_sdks(
    provider: SimulatedProvider,
) -> None:
    openai_client = openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )
    anthropic_client = anthropic.Anthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    )
    question = [{"role": "user", "content": "why is the sky blue"}]

    @step
    def raw_chat() -> str:
        raw = openai_client.chat.completions.with_raw_response.create(
            model="sim-model",
            messages=question,  # type: ignore[arg-type]
        )
        return str(raw.parse().choices[0].message.content)

    @step
    def responses_stream() -> str:
        with openai_client.responses.stream(
            model="sim-model", input="why is the sea blue"
        ) as stream:
            for _ in stream:
                pass
            return stream.get_final_response().output_text

    @step
    def raw_message() -> None:
        anthropic_client.messages.with_raw_response.create(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=question,  # type: ignore[arg-type]
        )

    @workflow(name="tests.metering.sync")
    def ask() -> str:
        raw_message()
        return raw_chat() + responses_stream()

    async with Engine("memory://") as engine:
        await engine.run(ask, run_id="sync")
        ledger = await engine.ledger("sync")
    calls, inputs, outputs = answered_tokens(provider)
    assert calls == 3
    assert (ledger.incurred.calls, ledger.incurred.unmetered_calls) == (3, 0)
    assert ledger.incurred.input_tokens == inputs
    assert ledger.incurred.output_tokens == outputs
    openai_client.close()
    anthropic_client.close()


async def test_a_budget_says_when_unmetered_calls_were_made(
    provider: SimulatedProvider,
) -> None:
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )

    @step
    async def costly(question: str) -> str:
        stream = await client.chat.completions.create(
            model="sim-model",
            messages=[{"role": "user", "content": question}],
            stream=True,  # no include_usage: this call is unmetered
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
        reply = await client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": text}]
        )
        return str(reply.choices[0].message.content)

    @workflow(name="tests.metering.budget-unmetered", budget_usd=0.0001)
    async def loop() -> list[str]:
        return [await costly(f"question {i}") for i in range(5)]

    async with Engine("memory://", prices=PRICES) as engine:
        with pytest.raises(BudgetExceeded, match=r"\+ 1 unmetered call of unknown"):
            await engine.run(loop, run_id="b")
    assert provider.count() == 2  # the first step crossed the budget; no second
    await client.close()


async def test_a_response_the_meter_did_not_see_is_read_from_what_the_step_returns(
    provider: SimulatedProvider,
) -> None:
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )
    made_outside = await client.chat.completions.create(  # before any run: not metered
        model="sim-model", messages=[{"role": "user", "content": "made outside"}]
    )

    @step
    async def hand_over() -> ChatCompletion:
        return made_outside

    @workflow(name="tests.metering.outside")
    async def ask() -> str:
        return str((await hand_over()).choices[0].message.content)

    async with Engine("memory://", prices=PRICES) as engine:
        await engine.run(ask, run_id="outside")
        ledger = await engine.ledger("outside")
    await client.close()
    calls, inputs, outputs = answered_tokens(provider)
    assert (ledger.incurred.calls, ledger.incurred.input_tokens) == (calls, inputs)
    assert ledger.incurred.output_tokens == outputs


async def test_calls_to_a_model_without_a_price_are_counted_as_unpriced_in_the_metrics(
    provider: SimulatedProvider,
) -> None:
    client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )

    @step
    async def answer(model: str) -> str:
        r = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "tea or coffee"}]
        )
        return str(r.choices[0].message.content)

    @workflow(name="tests.metering.unpriced")
    async def ask() -> str:
        return await answer("sim-model") + await answer("unpriced-model")

    metrics = Metrics()
    async with Engine("memory://", prices=PRICES, observers=[metrics]) as engine:
        await engine.run(ask, run_id="unpriced")
        forked = await engine.fork("unpriced", at_step=2)
        await engine.resume(forked)  # replays both calls: reused
    for source in ("incurred", "reused"):
        unpriced = {"workflow": "tests.metering.unpriced", "source": source}
        assert (
            metrics.value(
                "resumable_llm_unpriced_calls", model="unpriced-model", **unpriced
            )
            == 1
        )
        assert (
            metrics.value("resumable_llm_cost_usd", model="unpriced-model", **unpriced)
            == 0
        )
        # its tokens are counted; the priced model's calls are not unpriced
        assert (
            metrics.value(
                "resumable_llm_tokens",
                model="unpriced-model",
                direction="input",
                **unpriced,
            )
            > 0
        )
        assert (
            metrics.value("resumable_llm_unpriced_calls", model="sim-model", **unpriced)
            == 0
        )
        assert (
            metrics.value("resumable_llm_cost_usd", model="sim-model", **unpriced) > 0
        )
    await client.close()


async def test_async_raw_and_streaming_responses_of_both_sdks_are_metered(
    provider: SimulatedProvider,
) -> None:
    openai_client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )
    anthropic_client = anthropic.AsyncAnthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    )
    question = [{"role": "user", "content": "why is the sky blue"}]

    @step
    async def raw_chat() -> str:
        raw = await openai_client.chat.completions.with_raw_response.create(
            model="sim-model",
            messages=question,  # type: ignore[arg-type]
        )
        return str(raw.parse().choices[0].message.content)

    @step
    async def streaming_response() -> None:
        # its parse() is a coroutine: the meter awaits it (the SDK caches it)
        async with openai_client.chat.completions.with_streaming_response.create(
            model="sim-model",
            messages=question,  # type: ignore[arg-type]
        ) as response:
            await response.parse()

    @step
    async def raw_message() -> None:
        await anthropic_client.messages.with_raw_response.create(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=question,  # type: ignore[arg-type]
        )

    @workflow(name="tests.metering.async-raw")
    async def ask() -> str:
        text = ""
        for _ in range(2):  # the second time, each kind of result is known
            text += await raw_chat()
            await streaming_response()
            await raw_message()
        return text

    async with Engine("memory://") as engine:
        await engine.run(ask, run_id="async-raw")
        ledger = await engine.ledger("async-raw")
    calls, inputs, outputs = answered_tokens(provider)
    assert calls == 6
    assert (ledger.incurred.calls, ledger.incurred.unmetered_calls) == (6, 0)
    assert ledger.incurred.input_tokens == inputs
    assert ledger.incurred.output_tokens == outputs
    await openai_client.close()
    await anthropic_client.close()


async def test_metering_looks_for_no_missing_field_on_each_call_or_event(
    provider: SimulatedProvider,
) -> None:
    """A field an SDK model lacks is looked for once per class, not per call or
    chunk: pydantic answers a miss by raising AttributeError inside (twice),
    which costs more than the rest of the meter's work on a call."""
    openai_client = openai.AsyncOpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    )
    anthropic_client = anthropic.AsyncAnthropic(
        base_url=provider.anthropic_base_url, api_key="x", max_retries=0
    )

    @step
    async def calls_and_streams(i: int) -> str:
        messages: Any = [{"role": "user", "content": f"question {i}"}]
        r = await openai_client.chat.completions.create(
            model="sim-model", messages=messages
        )
        stream = await openai_client.chat.completions.create(
            model="sim-model",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
        )
        text = "".join(
            [c.choices[0].delta.content or "" async for c in stream if c.choices]
        )
        async with openai_client.responses.stream(
            model="sim-model", input=f"question {i}"
        ) as events:
            async for _ in events:
                pass
        await anthropic_client.messages.create(
            model="claude-haiku-4-5", max_tokens=100, messages=messages
        )
        async with anthropic_client.messages.stream(
            model="claude-haiku-4-5", max_tokens=100, messages=messages
        ) as message:
            text += await message.get_final_text()
        return str(r.choices[0].message.content) + text

    @workflow(name="tests.metering.misses")
    async def ask(n: int) -> int:
        return sum([len(await calls_and_streams(i)) for i in range(n)])

    missed: list[str] = []

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        # a miss in a model's __getattr__, asked for by resumable's own code
        if (
            event == "exception"
            and frame.f_code.co_name == "__getattr__"
            and frame.f_back is not None
            and "/resumable/" in frame.f_back.f_code.co_filename
        ):
            missed.append(f"{arg[1]} in {frame.f_back.f_code.co_name}")
        return trace

    async with Engine("memory://") as engine:
        await engine.run(ask, 1, run_id="warm")  # every class is seen once
        sys.settrace(trace)
        try:
            await engine.run(ask, 3, run_id="misses")
        finally:
            sys.settrace(None)
        assert (await engine.ledger("misses")).incurred.calls == 15
    assert missed == []
    await openai_client.close()
    await anthropic_client.close()


@pytest.mark.parametrize(
    "usage",
    [
        Usage(model="gpt-4o-mini", provider="openai", input_tokens=12, response_id="c"),
        Usage(model=None, provider=None, is_metered=False),
        Usage(model='m"é\u2028\ud800', provider="x", cost_usd=0.25, output_tokens=7),
        Usage(model="$t", provider="openai", cost_usd=1e-9, output_tokens=10**15),
    ],
)
def test_a_steps_usage_is_stored_as_plain_json_in_the_bytes_the_codec_writes(
    usage: Usage,
) -> None:
    """The step record's usage is written by `Serde.dumps_json`: the same bytes
    as the tagged codec's own encoding, so records read the same either way."""
    entries = encode_entries([(1, usage), (3, usage)])
    codec = Serde(TypeRegistry()).codec
    assert codec.encode_json(entries) == codec.encode(entries)
    assert codec.decode(codec.encode_json(entries)) == entries
