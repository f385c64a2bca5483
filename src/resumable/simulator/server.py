"""The simulated provider: a real HTTP/1.1 server on 127.0.0.1 for the real SDKs.

One thread per connection (keep-alive connections stay open, as httpx pools
them). `stop()` wakes every sleeping handler, shuts down every open
connection and joins every thread, so a test that stops its provider leaks no
socket and no thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import MappingProxyType, TracebackType
from typing import Self, cast
from urllib.parse import urlsplit

from resumable.simulator.faults import Fault, FaultInjector, FaultPlan
from resumable.simulator.log import RequestLog, RequestLogEntry, count_requests
from resumable.simulator.prompts import Api, InvalidRequest, Prompt, parse_prompt
from resumable.simulator.replies import Reply, make_reply
from resumable.simulator.wire import (
    Family,
    error_body,
    family_of,
    fault_headers,
    fault_message,
    fault_status,
    render,
    render_stream,
    request_id_header,
)

DEFAULT_PORT = 8089
"""The port `serve` listens on unless told otherwise."""

_ROUTES: MappingProxyType[str, Api] = MappingProxyType(
    {
        "/v1/chat/completions": "chat",
        "/v1/responses": "responses",
        "/v1/messages": "messages",
    }
)
_JOIN_TIMEOUT_S = 5.0


class SimulatedProvider:
    """A local stand-in for the OpenAI and Anthropic APIs, with injectable faults.

    Serves `POST /v1/chat/completions`, `POST /v1/responses` and
    `POST /v1/messages` (streaming or not) plus `GET /healthz`. Answers are
    deterministic: the same prompt gets the same text and usage in any
    process. Use it as a context manager, or `start()`/`stop()` from any thread.

    Example:
        with SimulatedProvider(faults=FaultPlan(schedule={1: Fault(kind="rate_limit")})) as p:
            client = openai.OpenAI(base_url=p.openai_base_url, api_key="sk-test")
            client.chat.completions.create(model="gpt-4o-mini", messages=[...])
            assert p.count(status=429) == 1  # the SDK retried it
            assert p.count() == 1
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_s: float = 0.0,
        jitter_s: float = 0.0,
        faults: FaultPlan | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        """Configure the provider; nothing listens until `start()`.

        Args:
            host: interface to bind.
            port: TCP port; 0 picks a free one (read it back from `port`).
            latency_s: fixed delay before every answer.
            jitter_s: extra delay, uniform in [0, jitter_s), seeded by request number.
            faults: which requests fail; None fails nothing.
            log_path: also append every request to this JSONL file (see `read_log`).
        """
        self._host = host
        self._requested_port = port
        self._lock = threading.Lock()  # request numbering, faults, latency, the log
        self._lifecycle = threading.Lock()  # start/stop; never held by handlers
        self._latency_s = latency_s
        self._jitter_s = jitter_s
        self._injector = FaultInjector(faults or FaultPlan())
        self._seq = 0
        self._log = RequestLog(log_path)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> Self:
        """Bind and serve on a background thread.

        Raises:
            RuntimeError: already started.
            OSError: the port is taken.
        """
        with self._lifecycle:
            if self._server is not None:
                raise RuntimeError(
                    f"the simulated provider on {self.base_url} is already running"
                )
            stopping = threading.Event()
            server = _Server((self._host, self._requested_port), self)
            try:
                self._log.open()
            except OSError:
                server.server_close()
                raise
            thread = threading.Thread(
                target=server.accept_until_woken,
                name=f"simulated-llm:{server.server_address[1]}",
                daemon=True,
            )
            self._stopping, self._server, self._thread = stopping, server, thread
            thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections and join every thread; idempotent."""
        with self._lifecycle:
            server, thread = self._server, self._thread
            if server is None or thread is None:
                return
            self._stopping.set()  # wakes handlers sleeping on latency or a timeout fault
            server.wake()
            thread.join(_JOIN_TIMEOUT_S)
            server.server_close()
            server.drop_connections()
            server.join_handlers(_JOIN_TIMEOUT_S)
            self._log.close()
            self._server = self._thread = None

    @property
    def is_running(self) -> bool:
        """Whether the provider is serving (started and not stopped)."""
        return self._server is not None and not self._stopping.is_set()

    def wait(self) -> None:
        """Block until `stop()` is called from another thread (or Ctrl-C)."""
        # Short waits in a loop, so Ctrl-C is delivered promptly on every platform.
        while self.is_running:
            self._stopping.wait(0.5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound TCP port.

        Raises:
            RuntimeError: not started.
        """
        if self._server is None:
            raise RuntimeError(
                "the simulated provider is not running; call start() first"
            )
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """`base_url + "/v1"`, for `openai.OpenAI(base_url=...)`."""
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """`base_url`, for `anthropic.Anthropic(base_url=...)` (the SDK adds /v1/messages)."""
        return self.base_url

    # -- configuration -----------------------------------------------------------

    def set_faults(self, plan: FaultPlan | None) -> None:
        """Install a new fault plan; its request numbers and rule counts start at 0."""
        with self._lock:
            self._injector = FaultInjector(plan or FaultPlan())

    @property
    def faults(self) -> FaultPlan:
        """The fault plan in force."""
        with self._lock:
            return self._injector.plan

    def set_latency(self, latency_s: float, jitter_s: float = 0.0) -> None:
        """Change the delay before every answer."""
        with self._lock:
            self._latency_s, self._jitter_s = latency_s, jitter_s

    # -- the request log -----------------------------------------------------------

    def requests(self) -> list[RequestLogEntry]:
        """Every request received on an API path since start (or `reset_log`), in order."""
        return self._log.entries()

    def count(
        self,
        prompt_contains: str | None = None,
        *,
        status: int | None = 200,
        api: Api | None = None,
    ) -> int:
        """How many requests were answered with `status` (None: any outcome).

        Args:
            prompt_contains: count only requests whose last user message contains this.
            status: HTTP status to count; None counts every request, faults included.
            api: count only "chat", "responses" or "messages" requests.
        """
        return count_requests(self.requests(), prompt_contains, status=status, api=api)

    def reset_log(self) -> None:
        """Forget the in-memory log (a JSONL file keeps its lines)."""
        self._log.clear()

    # -- used by the handler ---------------------------------------------------------

    def _admit(
        self, api: Api, prompt: Prompt | None, reply: Reply | None, rid: str, at: float
    ) -> tuple[Fault | None, float]:
        """Number the request, pick its fault and delay, and log it, atomically.

        Logging here, before any delay, keeps the log in arrival order and lets
        a client that already gave up (timeout) see its request counted.
        """
        with self._lock:
            self._seq += 1
            fault = None
            if prompt is not None:
                fault = self._injector.next_fault(
                    api=api, prompt_text=prompt.last_user_text
                )
            jitter = random.Random(f"jitter:{self._seq}").uniform(0, self._jitter_s)  # noqa: S311
            delay_s = self._latency_s + jitter
            if prompt is None:
                status: int | None = 400
            elif fault is None:
                status = 200
            elif fault.kind in ("timeout", "disconnect"):
                status = None
            else:
                status = fault_status(fault, family_of(api))
            self._log.append(
                RequestLogEntry(
                    seq=self._seq,
                    api=api,
                    model=prompt.model if prompt else "",
                    prompt_digest=prompt.digest if prompt else "",
                    last_user_text=prompt.last_user_text if prompt else "",
                    status=status,
                    fault=fault.kind if fault else None,
                    usage=reply.usage if reply is not None and status == 200 else None,
                    is_stream=prompt.is_stream if prompt else False,
                    request_id=f"req_{rid}",
                    at=at,
                )
            )
        return fault, delay_s

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopping; False when the provider is stopping."""
        if seconds > 0:
            return not self._stopping.wait(seconds)
        return not self._stopping.is_set()


class _Server(HTTPServer):
    """HTTPServer with a thread per connection that `stop()` can fully tear down."""

    request_queue_size = 128  # 20+ clients connect at once; a backlog of 5 drops SYNs

    def __init__(self, address: tuple[str, int], provider: SimulatedProvider) -> None:
        self.provider = provider
        self._tracked_lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        super().__init__(address, _Handler)
        # Non-blocking, so a client that resets before accept() cannot hang the loop.
        self.socket.setblocking(False)
        # A byte on this pair wakes the accept loop at once (serve_forever polls).
        self._wake_r, self._wake_w = socket.socketpair()

    def accept_until_woken(self) -> None:
        """Accept connections, each on its own thread, until `wake()`."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r:
                        return
                    try:
                        connection, address = self.socket.accept()
                    except OSError:  # gone before we got to it, or spurious wake-up
                        continue
                    connection.setblocking(True)
                    self.process_request(connection, address)

    def wake(self) -> None:
        """End `accept_until_woken`."""
        self._wake_w.send(b"\0")

    def server_close(self) -> None:
        super().server_close()
        self._wake_r.close()
        self._wake_w.close()

    def process_request(
        self,
        request: socket.socket | tuple[bytes, socket.socket],
        client_address: object,
    ) -> None:
        connection = cast(socket.socket, request)
        thread = threading.Thread(
            target=self._process_in_thread,
            args=(connection, client_address),
            daemon=True,
        )
        with self._tracked_lock:
            self._connections.add(connection)
            self._handlers.add(thread)
        thread.start()

    def _process_in_thread(
        self, connection: socket.socket, client_address: object
    ) -> None:
        try:
            self.finish_request(connection, client_address)
        except OSError:
            pass  # the client went away; nothing to answer
        finally:
            self.shutdown_request(connection)
            with self._tracked_lock:
                self._connections.discard(connection)
                self._handlers.discard(threading.current_thread())

    def drop_connections(self) -> None:
        """Shut down every open connection, waking handlers blocked reading keep-alives."""
        with self._tracked_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by its handler
                connection.shutdown(socket.SHUT_RDWR)

    def join_handlers(self, timeout_s: float) -> None:
        """Wait for every connection thread to finish."""
        deadline = time.monotonic() + timeout_s
        with self._tracked_lock:
            handlers = list(self._handlers)
        for thread in handlers:
            thread.join(max(0.0, deadline - time.monotonic()))


class _Handler(BaseHTTPRequestHandler):
    """Parses one request at a time on a keep-alive connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # answers are small and must leave at once
    server_version = "resumable-simulator"
    sys_version = ""

    @property
    def provider(self) -> SimulatedProvider:
        return cast(_Server, self.server).provider

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet: tests read the request log instead of stderr."""

    def do_GET(self) -> None:
        """Health check for scripts that start the provider in another process."""
        self._read_body()
        if urlsplit(self.path).path.rstrip("/") == "/healthz":
            self._send_json(200, {"status": "ok"}, {})
            return
        self._not_found()

    def do_PUT(self) -> None:
        """No API here takes PUT."""
        self._read_body()
        self._not_found()

    def do_PATCH(self) -> None:
        """No API here takes PATCH."""
        self.do_PUT()

    def do_DELETE(self) -> None:
        """No API here takes DELETE."""
        self.do_PUT()

    def do_POST(self) -> None:
        """Answer one API request, or inject its fault."""
        at = time.time()
        body = self._read_body()
        api = _ROUTES.get(urlsplit(self.path).path.rstrip("/"))
        if api is None:
            self._not_found()
            return
        family = family_of(api)
        rid = uuid.uuid4().hex[:24]
        headers = {request_id_header(family): f"req_{rid}"}
        try:
            prompt = parse_prompt(api, json.loads(body))
        except (ValueError, InvalidRequest) as exc:  # JSONDecodeError is a ValueError
            self.provider._admit(api, None, None, rid, at)
            message = f"invalid request: {exc}"
            self._send_json(400, error_body(family, 400, message, rid=rid), headers)
            return
        reply = make_reply(prompt)
        fault, delay_s = self.provider._admit(api, prompt, reply, rid, at)
        if not self.provider._sleep(delay_s):
            self.close_connection = True
            return
        if fault is None:
            self._send_answer(prompt, reply, rid, headers)
        elif fault.kind == "disconnect":
            # Nothing is written; the handler returns and the socket is closed.
            self.close_connection = True
        elif fault.kind == "timeout":
            # A client with a longer timeout than delay_s still gets its answer.
            if self.provider._sleep(fault.delay_s):
                self._send_answer(prompt, reply, rid, headers)
            else:
                self.close_connection = True
        else:
            status = fault_status(fault, family)
            body_out = error_body(family, status, fault_message(fault, status), rid=rid)
            self._send_json(status, body_out, {**headers, **fault_headers(fault)})

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0  # the body then reads as malformed JSON: a 400
        return self.rfile.read(length) if length > 0 else b""

    def _send_answer(
        self, prompt: Prompt, reply: Reply, rid: str, headers: dict[str, str]
    ) -> None:
        created = int(time.time())
        if prompt.is_stream:
            stream = render_stream(prompt, reply, rid=rid, created=created)
            self._send(200, stream, "text/event-stream; charset=utf-8", headers)
        else:
            self._send_json(
                200, render(prompt, reply, rid=rid, created=created), headers
            )

    def _not_found(self) -> None:
        # An Anthropic SDK always sends anthropic-version; anything else gets OpenAI's format.
        family: Family = (
            "anthropic" if "anthropic-version" in self.headers else "openai"
        )
        rid = uuid.uuid4().hex[:24]
        message = (
            f"Unknown request URL: {self.command} {self.path} (simulated provider)"
        )
        headers = {"x-request-id": f"req_{rid}", "request-id": f"req_{rid}"}
        self._send_json(404, error_body(family, 404, message, rid=rid), headers)

    def _send_json(
        self, status: int, body: dict[str, object], headers: dict[str, str]
    ) -> None:
        self._send(status, json.dumps(body).encode(), "application/json", headers)

    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str]
    ) -> None:
        # Status line, headers and body in one write: a separate body write
        # would wait for the client's delayed ACK under Nagle (~40 ms a request).
        lines = [
            f"{self.protocol_version} {status} {_reason(status)}",
            f"server: {self.server_version}",
            f"date: {self.date_time_string()}",
            f"content-type: {content_type}",
            f"content-length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        if self.close_connection:
            lines.append("connection: close")
        head = "\r\n".join(lines) + "\r\n\r\n"
        self.wfile.write(head.encode("latin-1") + body)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Error"  # http.HTTPStatus has no 529


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    latency_s: float = 0.0,
    jitter_s: float = 0.0,
    faults: FaultPlan | None = None,
    log_path: str | os.PathLike[str] | None = None,
    on_ready: Callable[[SimulatedProvider], None] | None = None,
) -> None:
    """Run a simulated provider in the foreground until Ctrl-C (for `resumable simulate-llm`).

    Args:
        host: interface to bind.
        port: TCP port; 0 picks a free one (`on_ready` can report it).
        latency_s: fixed delay before every answer.
        jitter_s: extra random delay in [0, jitter_s), seeded by request number.
        faults: which requests fail; None fails nothing.
        log_path: append every request to this JSONL file.
        on_ready: called once listening, e.g. to print `provider.openai_base_url`.
    """
    provider = SimulatedProvider(
        host=host,
        port=port,
        latency_s=latency_s,
        jitter_s=jitter_s,
        faults=faults,
        log_path=log_path,
    )
    with provider:
        if on_ready is not None:
            on_ready(provider)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it is meant to end
            provider.wait()
