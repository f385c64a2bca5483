from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path

import openai
import pytest

from resumable.simulator import Fault, FaultPlan, SimulatedProvider, read_log, serve

MODEL = "gpt-4o-mini"


def get(port: int, path: str) -> tuple[int, object]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_stop_closes_idle_keep_alive_connections_and_joins_their_threads() -> None:
    before = threading.active_count()
    provider = SimulatedProvider().start()
    connection = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=5)
    try:
        for _ in range(2):  # two requests on one connection: keep-alive works
            connection.request("GET", "/healthz")
            response = connection.getresponse()
            assert response.status == 200
            assert json.loads(response.read()) == {"status": "ok"}
        started = time.monotonic()
        provider.stop()  # the connection is still open on our side

        assert time.monotonic() - started < 1.0
        assert threading.active_count() == before
        assert not provider.is_running
    finally:
        connection.close()


def test_stop_wakes_a_handler_stalled_by_a_timeout_fault() -> None:
    provider = SimulatedProvider(
        faults=FaultPlan(schedule={1: Fault(kind="timeout", delay_s=60)})
    )
    with (
        provider,
        openai.OpenAI(
            base_url=provider.openai_base_url,
            api_key="sk-test",
            max_retries=0,
            timeout=0.1,
        ) as client,
    ):
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )
        started = time.monotonic()
        provider.stop()

    assert time.monotonic() - started < 1.0


def test_start_twice_raises_and_port_needs_a_running_provider() -> None:
    provider = SimulatedProvider()
    with pytest.raises(RuntimeError, match="not running"):
        _ = provider.port
    with provider:
        with pytest.raises(RuntimeError, match="already running"):
            provider.start()
        assert provider.base_url == f"http://127.0.0.1:{provider.port}"
        assert provider.openai_base_url == provider.base_url + "/v1"
        assert provider.anthropic_base_url == provider.base_url
    provider.stop()  # idempotent


def test_a_stopped_provider_can_start_again_and_keeps_its_log() -> None:
    provider = SimulatedProvider()
    for _ in range(2):
        with (
            provider,
            openai.OpenAI(
                base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
            ) as client,
        ):
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hi"}]
            )

    assert provider.count("hi") == 2


def test_unknown_methods_and_paths_get_404_json() -> None:
    with SimulatedProvider() as provider:
        status, body = get(provider.port, "/v1/models")

    assert status == 404
    assert isinstance(body, dict)
    assert body["error"]["code"] == "unknown_url"


def test_serve_blocks_until_the_provider_is_stopped(tmp_path: Path) -> None:
    log_path = tmp_path / "serve.jsonl"
    results: list[int] = []
    users: list[threading.Thread] = []

    def use_then_stop(provider: SimulatedProvider) -> None:
        def run() -> None:
            with openai.OpenAI(
                base_url=provider.openai_base_url, api_key="sk-test", max_retries=0
            ) as client:
                client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "hi"}]
                )
            results.append(provider.count())
            provider.stop()

        users.append(threading.Thread(target=run))
        users[0].start()

    serve(port=0, log_path=log_path, on_ready=use_then_stop)
    users[0].join()

    assert results == [1]
    assert len(read_log(log_path)) == 1
