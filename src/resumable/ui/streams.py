"""Server-sent events of a run's feed, for browsers that reconnect.

A chat UI shows a streaming step's answer as it is made; when the browser's
connection drops, `EventSource` reconnects by itself and sends the id of the last
event it got (`Last-Event-ID`). Each event's id here is its offset in the feed,
so the stream goes on from there, whichever process serves the reconnection, and
even after the process that ran the step died (the new attempt arrives marked).

Mount `asgi_app(engine)` in a web app, or call `stream_response` /
`events_response` from an endpoint of your own::

    app.mount("/live", resumable.ui.streams.asgi_app(engine))
    # browser: new EventSource("/live/stream?run=chat-7&step=1")
    #          new EventSource("/live/events?run=batch-3")

The dashboard serves the same two endpoints under `/sse/`. Stream events are
named after their kind (`attempt`, `chunk`, `end`), with JSON data
`{"attempt": n, "value": ...}`; progress events are `event` with
`{"key": ..., "value": ...}`. The server closes the response when the stream or
the run is over; the page closes its `EventSource` on `end` (or when the run's
status says so), else it would reconnect.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from resumable._engine.engine import Engine
from resumable.errors import ResumableError, RunNotFound

RETRY_MS: Final = 1000
"""How soon a browser reconnects after the connection drops (the SSE `retry:`)."""
_HEADERS: Final = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def _frame(offset: int, kind: str, data: object) -> bytes:
    body = json.dumps(data, default=str, ensure_ascii=False)
    lines = "".join(f"data: {line}\n" for line in body.splitlines() or [""])
    return f"id: {offset}\nevent: {kind}\n{lines}\n".encode()


def last_event_id(request: Request) -> int:
    """Where a (re)connecting client is: `Last-Event-ID`, or `?since=`, else 0."""
    given = request.headers.get("last-event-id") or request.query_params.get("since")
    try:
        return max(int(given or 0), 0)
    except ValueError:
        return 0


async def _stream_frames(
    engine: Engine, run_id: str, step: int, since: int
) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    async for event in engine.stream(run_id, step, since=since):
        yield _frame(
            event.offset, event.kind, {"attempt": event.attempt, "value": event.value}
        )


async def _event_frames(
    engine: Engine, run_id: str, since: int
) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    async for event in engine.watch(run_id, after=since):
        yield _frame(event.offset, "event", {"key": event.key, "value": event.value})


async def stream_response(
    engine: Engine, request: Request, run_id: str, step: int
) -> Response:
    """The stream of the step at seq `step` as SSE, from where the client left off."""
    try:
        await engine.get(run_id)
    except RunNotFound as exc:
        return PlainTextResponse(str(exc), status_code=404)
    return StreamingResponse(
        _stream_frames(engine, run_id, step, last_event_id(request)),
        media_type="text/event-stream",
        headers=_HEADERS,
    )


async def events_response(engine: Engine, request: Request, run_id: str) -> Response:
    """The run's progress events as SSE, from where the client left off."""
    try:
        await engine.get(run_id)
    except RunNotFound as exc:
        return PlainTextResponse(str(exc), status_code=404)
    return StreamingResponse(
        _event_frames(engine, run_id, last_event_id(request)),
        media_type="text/event-stream",
        headers=_HEADERS,
    )


def _query(request: Request) -> tuple[str, int] | Response:
    run_id = request.query_params.get("run", "")
    try:
        step = int(request.query_params.get("step", "0"))
    except ValueError:
        step = 0
    if not run_id:
        return PlainTextResponse("give ?run=RUN_ID", status_code=400)
    return run_id, step


def routes(engine: Engine) -> list[Route]:
    """`/stream?run=&step=` and `/events?run=`: the two SSE endpoints."""

    async def stream(request: Request) -> Response:
        asked = _query(request)
        if isinstance(asked, Response):
            return asked
        run_id, step = asked
        if step < 1:
            return PlainTextResponse("give ?step=SEQ (from 1)", status_code=400)
        try:
            return await stream_response(engine, request, run_id, step)
        except ResumableError as exc:
            return PlainTextResponse(str(exc), status_code=400)

    async def events(request: Request) -> Response:
        asked = _query(request)
        if isinstance(asked, Response):
            return asked
        try:
            return await events_response(engine, request, asked[0])
        except ResumableError as exc:
            return PlainTextResponse(str(exc), status_code=400)

    return [Route("/stream", stream), Route("/events", events)]


def asgi_app(engine: Engine) -> Starlette:
    """An ASGI app serving a run's streams and events as SSE (see the module doc).

    It has no authentication of its own: mount it behind your app's, and let the
    user read only the runs that are theirs.
    """
    return Starlette(routes=list(routes(engine)))
