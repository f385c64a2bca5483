from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from resumable.simulator import (
    Fault,
    FaultPlan,
    RequestLogEntry,
    SimulatedProvider,
    Usage,
    count_requests,
    read_log,
)

MODEL = "gpt-4o-mini"


def ask(client: openai.OpenAI, text: str) -> str:
    completion = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}]
    )
    return completion.choices[0].message.content or ""


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[SimulatedProvider]:
    with SimulatedProvider(log_path=tmp_path / "requests.jsonl") as provider:
        yield provider


@pytest.fixture
def client(provider: SimulatedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
    ) as client:
        yield client


def test_request_log_counts_per_prompt(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    for text in ("summarize doc-1", "summarize doc-2", "summarize doc-1"):
        ask(client, text)

    assert provider.count() == 3
    assert provider.count("doc-1") == 2
    assert provider.count("doc-2") == 1
    assert provider.count("doc-3") == 0
    assert provider.count(api="messages") == 0
    first, second, third = provider.requests()
    assert [e.seq for e in (first, second, third)] == [1, 2, 3]
    assert (first.api, first.model, first.status, first.fault) == (
        "chat",
        MODEL,
        200,
        None,
    )
    assert first.last_user_text == "summarize doc-1"
    assert first.prompt_digest == third.prompt_digest != second.prompt_digest
    assert first.usage is not None
    assert first.usage == third.usage
    assert (
        first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    )


def test_reset_log_forgets_entries_but_not_numbering(
    provider: SimulatedProvider, client: openai.OpenAI
) -> None:
    ask(client, "one")
    provider.reset_log()
    ask(client, "two")

    assert [(e.seq, e.last_user_text) for e in provider.requests()] == [(2, "two")]


def test_jsonl_log_has_one_line_per_request(
    provider: SimulatedProvider, client: openai.OpenAI, tmp_path: Path
) -> None:
    provider.set_faults(FaultPlan(schedule={2: Fault(kind="rate_limit")}))
    ask(client, "summarize doc-1")
    with pytest.raises(openai.RateLimitError):
        ask(client, "summarize doc-2")
    ask(client, "summarize doc-2")

    lines = (tmp_path / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 3
    assert [json.loads(line)["status"] for line in lines] == [200, 429, 200]
    assert read_log(tmp_path / "requests.jsonl") == provider.requests()
    assert count_requests(read_log(tmp_path / "requests.jsonl"), "doc-2") == 1


def test_read_log_skips_a_torn_last_line(tmp_path: Path) -> None:
    entry = RequestLogEntry(
        seq=1,
        api="messages",
        model="m",
        prompt_digest="abc",
        last_user_text="hi",
        status=200,
        fault=None,
        usage=Usage(input_tokens=1, output_tokens=2),
        is_stream=False,
        request_id="req_1",
        at=1.5,
    )
    path = tmp_path / "log.jsonl"
    path.write_text(entry.to_json() + "\n" + entry.to_json()[:20])

    assert read_log(path) == [entry]
    assert read_log(tmp_path / "missing.jsonl") == []


def test_a_provider_in_a_killed_subprocess_leaves_a_complete_log(
    tmp_path: Path,
) -> None:
    log_path = tmp_path / "child.jsonl"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "resumable.simulator",
            "--port",
            "0",
            "--log-path",
            str(log_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert child.stdout is not None
        announced = dict(pair.split("=", 1) for pair in child.stdout.readline().split())
        with openai.OpenAI(
            base_url=announced["OPENAI_BASE_URL"], api_key="sk-test", max_retries=0
        ) as client:
            for text in ("summarize doc-1", "summarize doc-2", "summarize doc-1"):
                ask(client, text)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()

    entries = read_log(log_path)
    assert len(log_path.read_text().splitlines()) == 3
    assert count_requests(entries) == 3
    assert count_requests(entries, "doc-1") == 2
