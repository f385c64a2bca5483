"""The demo's LLM workflow: summarize 50 documents, extract entities, write a report.

It runs in a child process (`resumable demo --child`) against the simulated
provider whose URL the parent passes in RESUMABLE_DEMO_OPENAI_BASE_URL, through
the real `openai` SDK with the SDK's own retries off: resumable's Retry, which
honours the provider's retry-after hints, is the only retry policy.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

import openai
from openai.types.chat import ChatCompletion

from resumable import Engine, Retry, map_steps, step, workflow

MODEL = "gpt-5-mini"
DOCUMENTS = 50
_TOPICS = (
    "a payment outage in the Frankfurt region",
    "the quarterly churn analysis for enterprise accounts",
    "a security review of the single sign-on rollout",
    "supplier delays affecting the Lisbon warehouse",
    "the migration of the billing database to PostgreSQL",
    "customer feedback on the new onboarding flow",
    "a compliance audit of data retention in Singapore",
    "the launch plan for the mobile app in Brazil",
)
_SENTENCES = (
    "The team led by Dana Whitfield traced the first alert to {place} at 04:12 UTC.",
    "Revenue exposure was estimated at {amount} before mitigations took effect.",
    "Acme Logistics and Northwind Bank were the two most affected customers.",
    "Engineering shipped a fix within six hours and added a regression test.",
    "Open questions remain about vendor contracts and on-call staffing in {place}.",
    "The steering committee asked for a follow-up review by the end of the month.",
)
_PLACES = ("Frankfurt", "Lisbon", "Singapore", "São Paulo", "Dublin", "Toronto")


def documents() -> list[dict[str, str]]:
    """The 50 built-in documents (the same every run)."""
    rng = random.Random(2026)  # noqa: S311 - fixed sample text, not security
    docs = []
    for n in range(DOCUMENTS):
        topic = _TOPICS[n % len(_TOPICS)]
        body = " ".join(
            sentence.format(
                place=rng.choice(_PLACES), amount=f"${rng.randint(20, 900)}k"
            )
            for sentence in rng.sample(_SENTENCES, k=5)
        )
        docs.append({"id": f"doc-{n + 1:02d}", "text": f"Report on {topic}. {body}"})
    return docs


# transient provider errors are retried by resumable (the SDK's own retries are off)
_RETRY = Retry(
    attempts=6,
    initial_delay=0.2,
    max_delay=2.0,
    on=(
        openai.RateLimitError,
        openai.InternalServerError,
        openai.APIConnectionError,
        openai.APITimeoutError,
    ),
)
_CLIENT: list[openai.AsyncOpenAI] = []
_FIRST_CALL_AT: list[float] = []


async def _complete(prompt: str) -> ChatCompletion:
    if not _CLIENT:
        _CLIENT.append(
            openai.AsyncOpenAI(
                base_url=os.environ["RESUMABLE_DEMO_OPENAI_BASE_URL"],
                api_key="sk-demo",
                max_retries=0,
            )
        )
    if not _FIRST_CALL_AT:
        _FIRST_CALL_AT.append(time.monotonic())
    return await _CLIENT[0].chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=120
    )


@step(name="summarize", retry=_RETRY)
async def summarize(doc: dict[str, str]) -> ChatCompletion:
    """One LLM call: a summary of a document."""
    return await _complete(f"Summarize {doc['id']} in three sentences: {doc['text']}")


@step(name="extract_entities", retry=_RETRY)
async def extract_entities(summary: dict[str, str]) -> ChatCompletion:
    """One LLM call: the people, companies and places in a summary."""
    return await _complete(
        f"List the entities in the summary of {summary['id']}: {summary['text']}"
    )


@step(name="write_report", retry=_RETRY)
async def write_report(
    summaries: list[dict[str, str]], entities: list[str]
) -> ChatCompletion:
    """One LLM call: the final report over every summary and entity list."""
    digest = " ".join(s["text"][:80] for s in summaries)
    return await _complete(
        f"Write an executive report from: {digest} Entities: {' '.join(entities)[:2000]}"
    )


def _text(response: ChatCompletion) -> str:
    return response.choices[0].message.content or ""


@workflow(name="resumable.demo.analyze")
async def analyze(docs: list[dict[str, str]]) -> str:
    """Summarize each document, extract entities from each summary, write a report."""
    summaries = await map_steps(summarize, docs, key=lambda d: d["id"], concurrency=8)
    summary_items = [
        {"id": d["id"], "text": _text(s)} for d, s in zip(docs, summaries, strict=True)
    ]
    entities = await map_steps(
        extract_entities, summary_items, key=lambda s: s["id"], concurrency=8
    )
    report = await write_report(summary_items, [_text(e) for e in entities])
    return _text(report)


def run_child(store: str, run_id: str) -> int:
    """Run (or resume) the demo workflow; print timings as one JSON line."""
    started = time.monotonic()
    engine = Engine(store)
    report = engine.run_sync(analyze, documents(), run_id=run_id)
    first_call = _FIRST_CALL_AT[0] - started if _FIRST_CALL_AT else None
    print(json.dumps({"report_chars": len(report), "to_first_call_s": first_call}))
    sys.stdout.flush()
    return 0
