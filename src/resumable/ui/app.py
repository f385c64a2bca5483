"""The dashboard's ASGI app: routes, the token gate, CSRF, host checks, actions.

It reads and acts only through `Engine`. Security by default:

- every POST carries the page's CSRF token (compared in constant time) and comes
  from this origin; a GET never changes anything;
- without a token, the Host header must name a loopback address (or `host`), so a
  page on another site that rebinds its DNS name to 127.0.0.1 cannot read the
  dashboard;
- with a token, every request must carry it (bearer header or the cookie the
  login form sets); `serve` refuses a non-loopback address without one;
- a Content-Security-Policy of 'self' only: no inline script or style runs.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from resumable._engine.engine import Engine
from resumable._engine.specs import WORKFLOWS
from resumable._engine.waits import unawaited
from resumable.errors import ResumableError, RunNotFound, UsageError
from resumable.ui import (
    lineage_page,
    run_page,
    runs_page,
    schedules_page,
    streams,
    threads_page,
    workers_page,
)
from resumable.ui.html import esc, page

logger = logging.getLogger("resumable.ui")

TOKEN_COOKIE = "resumable_ui_token"  # noqa: S105 - a cookie name, not a secret
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would send Origin: null
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

_MAX_FORM_BYTES = 1 << 20
Handler = Callable[[Request], Awaitable[Response]]


class Dashboard:
    """The app's state: the engine, the CSRF secret, the token, background resumes."""

    def __init__(
        self, engine: Engine, *, token: str | None, hosts: frozenset[str]
    ) -> None:
        self.engine = engine
        self.token = token
        self.hosts = hosts
        self.csrf = secrets.token_urlsafe(32)
        self.resumes: dict[str, asyncio.Task[Any]] = {}

    def allowed(self, request: Request) -> Response | None:
        """A refusal if the request fails the host or token checks, else None."""
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        # without a token the dashboard is loopback-only; a foreign Host then means
        # a page elsewhere rebound its DNS name to us (with a token, the token rules)
        if self.token is None and name.lower() not in self.hosts:
            return _text(
                f"refused: Host {host!r} is not an address this dashboard serves", 421
            )
        if self.token is None or request.url.path in ("/login", "/static/ui.css"):
            return None
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        cookie = request.cookies.get(TOKEN_COOKIE, "")
        if _same(bearer, self.token) or _same(cookie, self.token):
            return None
        if request.method == "GET":
            return RedirectResponse("/login", status_code=303)
        return _text("refused: this dashboard needs its token (log in at /login)", 401)

    async def checked_form(self, request: Request) -> dict[str, str]:
        """The POSTed form, after the CSRF and origin checks.

        Raises:
            PermissionError: the token is missing or wrong, or another origin posted.
        """
        origin = request.headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1] != request.headers.get(
            "host"
        ):
            raise PermissionError(f"a POST from origin {origin!r} is refused")
        fields = await _form(request)
        if not _same(fields.get("csrf", ""), self.csrf):
            raise PermissionError(
                "the form's CSRF token is missing or stale; reload the page and try again"
            )
        return fields


async def _form(request: Request) -> dict[str, str]:
    """An url-encoded form body (what our forms post; no multipart parser needed).

    Raises:
        PermissionError: the body is over 1 MiB (never cut: a cut value would be sent).
    """
    body = bytearray()
    async for chunk in request.stream():  # stop reading at the limit, not after it
        body += chunk
        if len(body) > _MAX_FORM_BYTES:
            raise PermissionError(
                f"the form is over the {_MAX_FORM_BYTES:,} bytes this dashboard "
                "takes; send large inputs with `resumable send` or Engine.send"
            )
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _text(message: str, status: int) -> Response:
    return Response(message + "\n", status_code=status, media_type="text/plain")


Render = Callable[[Dashboard, Request], Awaitable[tuple[str, str]]]


async def _runs(board: Dashboard, request: Request) -> tuple[str, str]:
    live = await runs_page.render(board.engine, request.query_params)
    return "Runs", f"<h1>Runs</h1>{live}"


async def _run(board: Dashboard, request: Request) -> tuple[str, str]:
    run_id = request.query_params.get("id", "")
    live = await run_page.render_live(
        board.engine, run_id, request.query_params.get("steps")
    )
    if request.headers.get("x-fragment") == "1":
        return run_id, live
    view = await board.engine.get(run_id)
    steps = len(await board.engine.history(run_id))
    note = request.query_params.get("note")
    flash = f"<p class=flash>{esc(note)}</p>" if note else ""
    awaited = await board.engine.awaited_keys(run_id)
    return run_id, flash + live + run_page.actions(view, board.csrf, steps, awaited)


async def _lineage(board: Dashboard, request: Request) -> tuple[str, str]:
    run_id = request.query_params.get("id", "")
    body = await lineage_page.render_lineage(board.engine, run_id)
    return f"Lineage {run_id}", body


async def _diff(board: Dashboard, request: Request) -> tuple[str, str]:
    a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
    return "Diff", await lineage_page.render_diff(board.engine, a, b)


async def _threads(board: Dashboard, request: Request) -> tuple[str, str]:
    params = dict(request.query_params)
    return "Threads", await threads_page.render_threads(board.engine, params)


async def _thread(board: Dashboard, request: Request) -> tuple[str, str]:
    params = request.query_params
    thread_id = params.get("id", "")
    body = await threads_page.render_thread(
        board.engine, thread_id, params.get("cp"), params.get("ns", "")
    )
    return f"Thread {thread_id}", body


async def _workers(board: Dashboard, request: Request) -> tuple[str, str]:
    return "Workers", await workers_page.render_workers(board.engine)


async def _schedules(board: Dashboard, request: Request) -> tuple[str, str]:
    note = request.query_params.get("note")
    return "Schedules", await schedules_page.render_schedules(
        board.engine, board.csrf, note
    )


_PAGES: tuple[tuple[str, Render], ...] = (
    ("/", _runs),
    ("/run", _run),
    ("/lineage", _lineage),
    ("/diff", _diff),
    ("/threads", _threads),
    ("/thread", _thread),
    ("/workers", _workers),
    ("/schedules", _schedules),
)


def _html(board: Dashboard, render: Render) -> Handler:
    """A GET endpoint: the whole page, or with `X-Fragment: 1` only its body."""

    async def endpoint(request: Request) -> Response:
        try:
            title, body = await render(board, request)
        except RunNotFound as exc:
            return _error(board, str(exc), 404)
        except ResumableError as exc:
            return _error(board, str(exc), 400)
        if request.headers.get("x-fragment") == "1":
            return HTMLResponse(body)
        return HTMLResponse(page(title, body, csrf=board.csrf))

    return endpoint


def create_app(
    engine: Engine, *, token: str | None = None, host: str = "127.0.0.1"
) -> Starlette:
    """The dashboard for `engine`'s store, as an ASGI app (serve it with uvicorn).

    Args:
        engine: What the dashboard reads and acts through.
        token: If given, every request must carry it (bearer header or the cookie
            the /login form sets).
        host: The address served; its name is accepted in the Host header.
    """
    hosts = LOOPBACK_NAMES | {host.lower(), f"[{host.lower()}]"}
    board = Dashboard(engine, token=token, hosts=frozenset(hosts))
    static = StaticFiles(directory=str(resources.files("resumable.ui") / "static"))
    routes: list[BaseRoute] = [
        Route(path, _html(board, render)) for path, render in _PAGES
    ]
    routes += [
        Route("/login", _login(board), methods=["GET", "POST"]),
        Route("/actions/{action}", _action(board), methods=["POST"]),
        Route("/schedules/{action}", _schedule_action(board), methods=["POST"]),
        Mount("/sse", routes=streams.routes(engine)),  # behind the same guard
        Mount("/static", static),
    ]

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        for task in board.resumes.values():
            task.cancel()

    async def guard(request: Request, call_next: Handler) -> Response:
        refused = board.allowed(request)
        response = refused or await call_next(request)
        response.headers.update(_HEADERS)
        return response

    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(BaseHTTPMiddleware, dispatch=guard)],
    )


def _error(board: Dashboard, message: str, status: int) -> Response:
    body = f"<h1>Cannot show that</h1><p class=error>{esc(message)}</p><p><a href='/'>Back to runs</a></p>"
    return HTMLResponse(page("Error", body, csrf=board.csrf), status_code=status)


def _login(board: Dashboard) -> Handler:
    async def login(request: Request) -> Response:
        if request.method == "POST":
            try:
                given = (await _form(request)).get("token", "")
            except PermissionError as exc:
                return _text(f"refused: {exc}", 413)
            if board.token is not None and _same(given, board.token):
                response = RedirectResponse("/", status_code=303)
                response.set_cookie(
                    TOKEN_COOKIE, board.token, httponly=True, samesite="strict"
                )
                return response
            return _error(board, "wrong token", 401)
        body = (
            "<h1>Log in</h1><form method=post action='/login' class=filters>"
            "<label>Token <input name=token type=password required autofocus></label>"
            "<button>Log in</button></form>"
        )
        return HTMLResponse(page("Log in", body, csrf=""))

    return login


def _action(board: Dashboard) -> Handler:
    async def act(request: Request) -> Response:
        try:
            form = await board.checked_form(request)
        except PermissionError as exc:
            return _text(f"refused: {exc}", 403)
        run_id = form.get("run_id", "")
        action = request.path_params["action"]
        try:
            target, note = await _perform(board, action, run_id, form)
        except ResumableError as exc:
            return _error(board, f"{action} of run {run_id!r} failed: {exc}", 400)
        location = "/run?" + urlencode({"id": target, "note": note})
        return RedirectResponse(location, status_code=303)

    return act


def _schedule_action(board: Dashboard) -> Handler:
    async def act(request: Request) -> Response:
        try:
            form = await board.checked_form(request)
        except PermissionError as exc:
            return _text(f"refused: {exc}", 403)
        name, action = form.get("name", ""), request.path_params["action"]
        try:
            if action == "pause":
                await board.engine.pause_schedule(name)
            elif action == "resume":
                await board.engine.resume_schedule(name)
            else:
                raise UsageError(f"no schedule action {action!r}: pause or resume")
        except ResumableError as exc:
            return _error(board, f"{action} of schedule {name!r} failed: {exc}", 400)
        note = f"schedule {name}: {action}d"
        return RedirectResponse(
            "/schedules?" + urlencode({"note": note}), status_code=303
        )

    return act


async def _perform(
    board: Dashboard, action: str, run_id: str, form: dict[str, str]
) -> tuple[str, str]:
    """Do one action; returns the run to show next and a note about what happened."""
    engine = board.engine
    if action == "cancel":
        status = await engine.cancel(run_id)
        return run_id, f"cancel: the run is {status}"
    if action == "send":
        key = form.get("key", "")
        try:
            value = json.loads(form.get("value", ""))
        except json.JSONDecodeError as exc:
            raise UsageError(
                f'the value for key {key!r} is not JSON ({exc}); quote strings: "yes"'
            ) from None
        if not form.get("early"):
            refusal = unawaited(
                run_id,
                key,
                awaited=await engine.awaited_keys(run_id),
                status=(await engine.get(run_id)).status,
                early="ticking 'before the run waits for it'",
            )
            if refusal is not None:
                raise refusal
        await engine.send(run_id, key, value)
        return run_id, f"sent {key!r}; the run continues where it waits for it"
    if action == "fork":
        try:
            at_step = int(form.get("at_step", ""))
        except ValueError:
            raise UsageError("fork: the step must be a whole number") from None
        new_id = await engine.fork(
            run_id, at_step=at_step, run_id=form.get("new_id") or None
        )
        return new_id, f"forked from {run_id} at step {at_step}; resume it to run it"
    if action == "resume":
        view = await engine.get(run_id)  # RunNotFound now, not in the background
        if WORKFLOWS.get(view.workflow) is None:
            raise UsageError(
                f"workflow {view.workflow!r} is not registered in the dashboard's "
                f"process; start it with `resumable ui --app MODULE` (the module that "
                f"defines it), or let a worker (`resumable worker`) pick the run up"
            )
        running = board.resumes.get(run_id)
        if running is not None and not running.done():
            return run_id, "this dashboard is already resuming the run"
        task = asyncio.ensure_future(engine.resume(run_id))
        task.add_done_callback(lambda t: _log_outcome(run_id, t))
        board.resumes[run_id] = task
        return run_id, "resuming in this dashboard's process"
    raise UsageError(f"unknown action {action!r}; use resume, cancel, send or fork")


def _log_outcome(run_id: str, task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        logger.warning("resuming run %r ended with %s", run_id, error)
