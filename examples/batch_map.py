"""A batch of LLM calls: one journaled step per item, found again by its key.

`map_steps` runs a step on every item, a few at a time and under a rate limit, and
commits each item's result as its own step, identified by the key you give (here the
ticket id). If the process dies half-way, running it again replays the finished
tickets from the store and calls the model only for the rest.

    python examples/batch_map.py --crash   # killed after 8 tickets were sent
    python examples/batch_map.py           # the same batch: finished tickets replay

The model is resumable's simulated provider, started in this process and called
through the real openai SDK (set OPENAI_BASE_URL and OPENAI_API_KEY for a real
one); it answers ticket-07 with a 429 "rate limited" once, which Retry handles.
The store is $RESUMABLE_STORE (default: the SQLite file ./.resumable/state.db).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import textwrap

import openai
from openai.types.chat import ChatCompletion

from resumable import (
    Engine,
    RateLimit,
    Retry,
    RunNotFound,
    current_run,
    map_steps,
    step,
    workflow,
)
from resumable.simulator import Fault, FaultPlan, FaultRule, SimulatedProvider

STORE = os.environ.get("RESUMABLE_STORE", "sqlite:///.resumable/state.db")
RUN_ID = "tickets-monday"
CRASH_AFTER = 8 if "--crash" in sys.argv else None
TICKETS = [
    {"id": f"ticket-{n:02d}", "text": text}
    for n, text in enumerate(
        [
            "The invoice for March charged us twice.",
            "Password reset emails never arrive.",
            "Please add a dark mode to the dashboard.",
            "Export to CSV cuts off after 1000 rows.",
            "Our SSO login loops back to the start page.",
            "Can we pay yearly instead of monthly?",
            "The mobile app crashes when uploading photos.",
            "Search ignores accents in customer names.",
            "We need an audit log of admin actions.",
            "Webhook retries hammer our server after an outage.",
            "The API returns 500 for dates before 1970.",
            "How do I move seats between two teams?",
        ],
        start=1,
    )
]
started: list[str] = []  # the tickets this process sent (when to crash)


@functools.cache
def llm() -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(max_retries=0)  # resumable's Retry does the retrying


@step(
    retry=Retry(
        attempts=5,
        initial_delay=0.2,
        on=(openai.RateLimitError, openai.InternalServerError),
    )
)
async def summarize(ticket: dict[str, str]) -> ChatCompletion:
    """One LLM call per ticket; its response is committed before the batch moves on."""
    if current_run().attempt > 1:
        print(f"  {ticket['id']}  the provider said 429 (rate limited): retrying")
    else:
        if CRASH_AFTER is not None and len(started) == CRASH_AFTER:
            # stands in for an OOM kill or a deploy in the middle of the batch
            print(
                f"  CRASH      killed now (SIGKILL), {CRASH_AFTER} tickets sent",
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGKILL)
        started.append(ticket["id"])
    return await llm().chat.completions.create(
        model="gpt-5-mini",
        messages=[
            {"role": "system", "content": "Summarize the support ticket in one line."},
            {"role": "user", "content": ticket["text"]},
        ],
        max_tokens=20,
    )


@workflow(name="examples.tickets")
async def summarize_tickets(tickets: list[dict[str, str]]) -> dict[str, str]:
    """Every ticket's summary, by ticket id."""
    responses = await map_steps(
        summarize,
        tickets,
        key=lambda ticket: ticket["id"],  # an item's identity in the journal
        concurrency=4,  # calls in flight at once
        rate_limit=RateLimit(requests_per_minute=500, tokens_per_minute=200_000),
    )
    return {
        ticket["id"]: response.choices[0].message.content or ""
        for ticket, response in zip(tickets, responses, strict=True)
    }


async def main() -> None:
    async with Engine(STORE) as engine:
        try:
            finished_before = (await engine.get(RUN_ID)).status == "succeeded"
        except RunNotFound:
            finished_before = False
        print(f"run {RUN_ID}: summarizing {len(TICKETS)} support tickets")
        summaries = await engine.run(summarize_tickets, TICKETS, run_id=RUN_ID)
        print("(the summaries come from the simulated model: placeholder text)")
        for ticket_id, summary in summaries.items():
            print(
                f"  {ticket_id}  {textwrap.shorten(summary, width=70, placeholder=' ...')}"
            )
        if finished_before:
            print(
                "this process: nothing executed; the batch had finished, these are its results"
            )
        else:
            this = (await engine.ledger(RUN_ID)).executions[-1]  # what it recorded
            print(
                f"this process: replayed {plural(this.replayed_steps, 'finished ticket')}"
                f" from the store and made {plural(this.incurred.calls, 'LLM call')}"
            )


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


if __name__ == "__main__":
    with contextlib.ExitStack() as stack:
        if (
            "OPENAI_BASE_URL" not in os.environ
        ):  # no provider set: serve the simulated one
            once = FaultRule(
                fault=Fault(kind="rate_limit", retry_after_s=0.1),
                prompt_contains="The mobile app crashes",
                times=1,
            )
            provider = stack.enter_context(
                SimulatedProvider(faults=FaultPlan(rules=[once]))
            )
            os.environ["OPENAI_BASE_URL"] = provider.openai_base_url
            os.environ.setdefault("OPENAI_API_KEY", "sk-simulated")
        asyncio.run(main())
